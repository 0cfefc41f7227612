"""The data a recipe can name: the file loaders of xrisk.datasets and the runner's data kinds.

Every file is written by the test (tiny images, CSVs, npz); nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xrisk.datasets import (
    CHEXPERT_TASKS,
    ImageFolder,
    IndexedDataset,
    binary_image_folder,
    load_chexpert,
    load_medmnist_npz,
    murcko_scaffolds,
    read_smiles_csv,
    scaffold_split,
)

PIL = pytest.importorskip("PIL.Image")


def _image_folder(root: Path, counts: dict[str, int], size: int = 6) -> Path:
    """Class folders of PNG/JPEG files whose pixel value encodes (class, file)."""
    for c, (name, count) in enumerate(counts.items()):
        (root / name).mkdir(parents=True)
        for i in range(count):
            suffix = ".png" if i % 2 else ".JPG"
            PIL.new("L", (size + i % 3, size), 10 * c + i).save(root / name / f"{i:03d}{suffix}")
    (root / "notes.txt").write_text("not a class")
    return root


def test_image_folder_lists_without_reading_and_reads_lazily(tmp_path, monkeypatch):
    root = _image_folder(tmp_path, {"b": 3, "a": 2})
    reads: list[Path] = []
    from xrisk.datasets import image_folder

    real = image_folder.read_image

    def counting(path, **kwargs):
        reads.append(Path(path))
        return real(path, **kwargs)

    monkeypatch.setattr(image_folder, "read_image", counting)
    folder = ImageFolder(root, image_size=4, grayscale=True)
    dataset = IndexedDataset(folder)
    assert folder.classes == ("a", "b") and folder.targets.tolist() == [0, 0, 1, 1, 1]
    assert reads == []
    x, y, index = dataset.batch([4, 0])
    assert reads == [folder.paths[4], folder.paths[0]]
    assert x.shape == (2, 4, 4) and x.dtype == np.float32 and y.tolist() == [1, 0]
    # pixel values encode the folder's position in counts and the file: image 4 is class
    # b's third file (value 2), image 0 class a's first (value 10)
    assert np.allclose(x[0], 2 / 255, atol=1e-3) and np.allclose(x[1], 10 / 255, atol=1e-3)


def test_image_folder_refuses_a_folder_without_class_images(tmp_path):
    with pytest.raises(FileNotFoundError, match="no class sub-folder"):
        ImageFolder(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        ImageFolder(tmp_path / "missing")


def test_binary_image_folder_imratio_matches_the_generator(tmp_path):
    root = _image_folder(tmp_path, {"cat": 4, "dog": 12, "fox": 8})
    full = binary_image_folder(root, ["fox"])
    assert full.targets.tolist() == [0] * 16 + [1] * 8
    train = binary_image_folder(root, ["fox"], imratio=0.2, seed=3, image_size=6)
    # LibAUC's rule: all 16 negatives and floor(0.2 / 0.8 * 16) = 4 positives, seeded
    assert len(train) == 20 and int(train.targets.sum()) == 4
    again = binary_image_folder(root, ["fox"], imratio=0.2, seed=3)
    other = binary_image_folder(root, ["fox"], imratio=0.2, seed=4)
    assert train.data.indices.tolist() == again.data.indices.tolist()
    assert train.data.indices.tolist() != other.data.indices.tolist()
    x, y, _ = train.batch(np.arange(len(train)))
    folder = ImageFolder(root)
    positive = folder.targets[train.data.indices] == 2
    assert (positive == (y == 1)).all() and x.shape[0] == 20
    with pytest.raises(ValueError, match=r"positive_classes=\['wolf'\].*\['cat', 'dog', 'fox'\]"):
        binary_image_folder(root, ["wolf"])
    with pytest.raises(ValueError, match="at least one negative"):
        binary_image_folder(root, ["cat", "dog", "fox"])


def test_medmnist_npz_splits_and_binary_classes(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 10), ("val", 4), ("test", 6)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, 5, 5, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 4).reshape(n, 1)
    path = tmp_path / "tiny.npz"
    np.savez(path, **arrays)
    x, y = load_medmnist_npz(path, "test")
    assert x.shape == (6, 5, 5, 3) and x.max() <= 1 and y.tolist() == [0, 1, 2, 3, 0, 1]
    assert np.allclose(x * 255, arrays["test_images"])
    _, binary = load_medmnist_npz(path, "train", positive_classes=[1, 3])
    assert binary.tolist() == [0, 1, 0, 1] * 2 + [0, 1]
    with pytest.raises(ValueError, match="'valid'"):
        load_medmnist_npz(path, "valid")
    with pytest.raises(ValueError, match=r"positive_classes=\[7\]"):
        load_medmnist_npz(path, positive_classes=[7])
    np.savez(tmp_path / "bad.npz", train_images=arrays["train_images"])
    with pytest.raises(ValueError, match="train_labels"):
        load_medmnist_npz(tmp_path / "bad.npz")


def _chexpert(root: Path) -> Path:
    header = "Path,Sex,Frontal/Lateral," + ",".join(CHEXPERT_TASKS)
    lines = [header,
             "p0.jpg,F,Frontal,1.0,-1.0,-1.0,-1.0,-1.0",
             "p1.jpg,M,Lateral,1.0,1.0,1.0,1.0,1.0",
             "p2.jpg,M,Frontal,,,0.0,1.0,",
             "p3.jpg,F,Frontal,-1.0,0.0,1.0,,1.0"]
    for i in range(4):
        PIL.new("L", (10, 8), 40 * i).save(root / f"p{i}.jpg")
    path = root / "train.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_chexpert_frontal_views_and_uncertain_policy(tmp_path):
    path = _chexpert(tmp_path)
    data = load_chexpert(path, tmp_path, image_size=4)
    # frontal rows 0, 2, 3; -1 -> 1 for Edema and Atelectasis (U-Ones), 0 for the others
    assert data.targets.tolist() == [[1, 1, 0, 1, 0], [0, 0, 0, 1, 0], [0, 0, 1, 0, 1]]
    ones = load_chexpert(path, tmp_path, uncertain={"Cardiomegaly": "ones",
                                                    "Edema": "zeros"}, image_size=4)
    assert ones.targets[:, 0].tolist() == [1, 0, 1] and ones.targets[:, 1].tolist() == [0, 0, 0]
    every = load_chexpert(path, tmp_path, frontal_only=False, image_size=None)
    assert len(every) == 4
    x, _, _ = data.batch([2])
    assert x.shape == (1, 4, 4) and np.allclose(x, 120 / 255, atol=0.02)
    with pytest.raises(ValueError, match="uncertain\\['Edema'\\] = 'maybe'"):
        load_chexpert(path, tmp_path, uncertain={"Edema": "maybe"})
    path.write_text(path.read_text().replace("p3.jpg,F,Frontal,-1.0", "p3.jpg,F,Frontal,2.0"))
    with pytest.raises(ValueError, match="row 5, column 'Cardiomegaly': received '2.0'"):
        load_chexpert(path, tmp_path)


MOLECULES = ["c1ccccc1C", "c1ccccc1O", "c1ccccc1N", "c1ccccc1CC", "C1CCCCC1C", "C1CCCCC1O",
             "CCO", "CCN", "c1ccncc1", "c1ccoc1", "O=C1CCCN1"]


def test_scaffold_split_keeps_scaffolds_apart_largest_to_train():
    pytest.importorskip("rdkit")
    train, val, test = scaffold_split(MOLECULES, validation_size=0.2, test_size=0.2)
    scaffolds = murcko_scaffolds(MOLECULES)
    seen = [{scaffolds[i] for i in part} for part in (train, val, test)]
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    assert sorted([*train, *val, *test]) == list(range(len(MOLECULES)))
    # largest first: benzene (4 molecules), then of the two sets of 2 the one seen first
    # (cyclohexane here, the acyclic one in the reversed list); singletons go to test
    assert train.tolist() == [0, 1, 2, 3, 4, 5] and val.tolist() == [6, 7]
    assert test.tolist() == [8, 9, 10]
    assert [t.tolist() for t in scaffold_split(MOLECULES[::-1], validation_size=0.2,
                                                test_size=0.2)][0] == [3, 4, 7, 8, 9, 10]
    with pytest.raises(ValueError, match="validation_size \\+ test_size = 1.0"):
        scaffold_split(MOLECULES, validation_size=0.5, test_size=0.5)


def test_read_smiles_csv_labels_and_errors(tmp_path):
    path = tmp_path / "mols.csv"
    path.write_text("id,SMILES,a,b\n1,CCO,1,0\n2,CCN,,1\n")
    smiles, labels = read_smiles_csv(path, smiles_column="SMILES", label_columns=["a", "b"])
    assert smiles.tolist() == ["CCO", "CCN"]
    assert np.array_equal(labels, [[1, 0], [np.nan, 1]], equal_nan=True)
    with pytest.raises(ValueError, match="column 'smiles' is not in"):
        read_smiles_csv(path)
    path.write_text("smiles,label\nCCO,yes\n")
    with pytest.raises(ValueError, match="row 2, column 'label': received 'yes'"):
        read_smiles_csv(path)


# -- the runner's data kinds ----------------------------------------------------------------
def _splits(data: dict, seed: int = 0):
    pytest.importorskip("pydantic")
    from xrisk.runner.data import load_splits
    from xrisk.runner.recipe import parse_recipe

    recipe = parse_recipe({"data": data, "method": "ce"})
    return recipe, load_splits(recipe.data, seed=seed, dtype="float64")


def test_runner_image_folder_imratio_on_training_only(tmp_path):
    root = _image_folder(tmp_path, {"ok": 40, "sick": 24}, size=5)
    recipe, s = _splits({"name": "image_folder", "path": str(root), "positive_classes": ["sick"],
                         "image_size": 4, "imratio": 0.1, "standardize": False})
    assert recipe.data.split == "random"
    assert s.x_train.shape[1] == 16 and s.x_test.shape[1] == 16
    assert s.y_train.mean() == pytest.approx(0.1, abs=0.03)
    # validation and test keep the folder's ratio (24 / 64), stratified
    for y in (s.y_val, s.y_test):
        assert y.mean() == pytest.approx(24 / 64, abs=0.05)
    assert s.x_train.min() >= 0 and s.x_train.max() <= 1  # pixels, read from the files


def test_runner_smiles_csv_scaffold_split(tmp_path):
    pytest.importorskip("rdkit")
    rows = ["smiles,active"]
    rings = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCNCC1", "c1ccoc1", "C1CCOC1", "c1ccsc1"]
    for r, ring in enumerate(rings):
        for tail in ("C", "O", "N", "CC", "CO", "CN")[: 6 - r % 3]:
            rows.append(f"{ring}{tail},{int(tail in ('O', 'CO'))}")
    rows.append("not-a-smiles,1")
    path = tmp_path / "mols.csv"
    path.write_text("\n".join(rows) + "\n")
    recipe, s = _splits({"name": "smiles_csv", "path": str(path), "label_column": "active",
                         "fingerprint_bits": 64, "test_size": 0.2, "validation_size": 0.2,
                         "standardize": False})
    assert recipe.data.split == "scaffold"
    assert s.x_train.shape[1] == 64 and set(np.unique(s.x_train)) <= {0.0, 1.0}
    assert s.y_train.size + s.y_val.size + s.y_test.size == len(rows) - 2  # one unparsable

    def scaffolds(x: np.ndarray) -> set[bytes]:
        return {row.tobytes() for row in x}

    # no molecule of the test split shares a fingerprint-identical scaffold with training:
    # the split is by scaffold, so each split's rows come from distinct ring systems
    from xrisk.datasets import morgan_fingerprints, murcko_scaffolds

    smiles = np.array([line.split(",")[0] for line in rows[1:-1]])
    bits, _ = morgan_fingerprints(smiles, num_bits=64)
    ring_of = dict(zip((b.tobytes() for b in bits.astype(np.float64)), murcko_scaffolds(smiles)))
    train_rings = {ring_of[k] for k in scaffolds(s.x_train)}
    test_rings = {ring_of[k] for k in scaffolds(s.x_test)}
    assert train_rings and test_rings and not train_rings & test_rings
    _, again = _splits({"name": "smiles_csv", "path": str(path), "label_column": "active",
                        "fingerprint_bits": 64, "test_size": 0.2, "validation_size": 0.2,
                        "standardize": False}, seed=5)
    assert np.array_equal(again.x_test, s.x_test)  # deterministic: no seed involved


def test_runner_medmnist_uses_the_files_splits(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {}
    for split, n in (("train", 30), ("val", 10), ("test", 12)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, 3, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 3).reshape(n, 1)
    np.savez(tmp_path / "m.npz", **arrays)
    _, s = _splits({"name": "medmnist", "path": str(tmp_path / "m.npz"),
                    "positive_classes": ["2"], "standardize": False})
    assert (s.y_train.size, s.y_val.size, s.y_test.size) == (30, 10, 12)
    assert np.allclose(s.x_test * 255, arrays["test_images"].reshape(12, 9))
    assert s.y_test.tolist() == [int(i % 3 == 2) for i in range(12)]
    from xrisk.runner.recipe import RecipeError

    with pytest.raises(ValueError, match="expected a binary task"):
        _splits({"name": "medmnist", "path": str(tmp_path / "m.npz")})
    with pytest.raises(RecipeError, match="data.split: received 'scaffold'"):
        _splits({"name": "medmnist", "path": "m.npz", "split": "scaffold"})


def test_runner_chexpert_task_column(tmp_path):
    path = _chexpert(tmp_path)
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0], *text[1:] * 10]) + "\n")  # 30 frontal rows
    for i in range(4):
        PIL.new("L", (10, 8), 40 * i).save(tmp_path / f"p{i}.jpg")
    recipe, s = _splits({"name": "chexpert", "path": str(path), "image_root": str(tmp_path),
                         "task": "Consolidation", "image_size": 3, "test_size": 0.3,
                         "validation_size": 0.2, "standardize": False})
    assert s.x_train.shape[1] == 9
    y = np.concatenate([s.y_train, s.y_val, s.y_test])
    assert y.sum() == 10 and y.size == 30  # Consolidation: 1 on row p3 only (-1 -> 0)
    from xrisk.runner.recipe import RecipeError

    with pytest.raises(RecipeError, match="data.task: received 'Edemma'.*did you mean 'Edema'"):
        _splits({"name": "chexpert", "path": str(path), "task": "Edemma"})
    with pytest.raises(RecipeError, match="data.positive_classes: received None"):
        _splits({"name": "image_folder", "path": str(tmp_path)})


def test_runner_trains_on_an_image_folder(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    from xrisk.runner import train

    root = _image_folder(tmp_path / "images", {"ok": 30, "sick": 20}, size=5)
    results = train({"name": "img", "method": "pesg", "epochs": 2, "dtype": "float64",
                     "data": {"name": "image_folder", "path": str(root),
                              "positive_classes": ["sick"], "image_size": 4},
                     "model": {"hidden": [4]}, "sampler": {"batch_size": 8}},
                    tmp_path / "run", progress=False)
    assert len(results[0].history) == 2 and "auroc" in results[0].test


def test_runner_reads_only_the_images_limit_keeps(tmp_path, monkeypatch):
    from xrisk.datasets import image_folder

    root = _image_folder(tmp_path, {"ok": 40, "sick": 24}, size=5)
    read: list[Path] = []
    real = image_folder.read_image

    def counting(path, **kwargs):
        read.append(Path(path))
        return real(path, **kwargs)

    monkeypatch.setattr(image_folder, "read_image", counting)
    _, s = _splits({"name": "image_folder", "path": str(root), "positive_classes": ["sick"],
                    "image_size": 4, "limit": 20, "test_size": 0.25})
    assert len(read) == len(set(read)) == 20
    assert s.y_train.size + s.y_val.size + s.y_test.size == 20


def test_runner_images_reach_a_conv_model_as_images(tmp_path):
    """With ``images`` each kind keeps its images (N, H, W, C): MedMNIST's own, the image
    folder's at image_size, MNIST-5k 28x28, digits 8x8; grayscale gets a channel axis, and
    standardizing is per channel."""
    from xrisk.runner.data import load_splits

    rng = np.random.default_rng(1)
    arrays = {}
    for split, n in (("train", 30), ("val", 10), ("test", 12)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, 5, 5, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 2).reshape(n, 1)
    np.savez(tmp_path / "m.npz", **arrays)
    recipe, _ = _splits({"name": "medmnist", "path": str(tmp_path / "m.npz"),
                         "standardize": False})
    s = load_splits(recipe.data, seed=0, dtype="float64", images=True)
    assert s.x_train.shape == (30, 5, 5, 3) and s.x_test.shape == (12, 5, 5, 3)
    assert np.allclose(s.x_test * 255, arrays["test_images"])
    root = _image_folder(tmp_path / "folder", {"ok": 20, "sick": 12}, size=5)
    recipe, _ = _splits({"name": "image_folder", "path": str(root),
                         "positive_classes": ["sick"], "image_size": 4})
    s = load_splits(recipe.data, seed=0, dtype="float64", images=True)
    assert s.x_train.shape[1:] == (4, 4, 1)
    assert s.x_train.mean() == pytest.approx(0, abs=1e-9)  # one channel's statistics
    assert s.x_train.std() == pytest.approx(1, abs=1e-9)
    for name, side in (("mnist_5k", 28), ("digits", 8)):
        recipe, flat = _splits({"name": name, "limit": 40})
        s = load_splits(recipe.data, seed=0, dtype="float32", images=True)
        assert s.x_train.shape[1:] == (side, side, 1) and flat.x_train.shape[1] == side * side
        np.testing.assert_array_equal(s.y_train, flat.y_train)
    recipe, _ = _splits({"name": "breast_cancer"})
    with pytest.raises(ValueError, match="received 'breast_cancer' for a conv model"):
        load_splits(recipe.data, seed=0, dtype="float64", images=True)
