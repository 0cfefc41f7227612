"""The ``xrisk`` command: ``train``, ``compare``, ``tune``, ``report``, ``methods``, ``recipes``.

.. code-block:: text

    xrisk train RECIPE [--framework jax] [--seeds 3] [--set loss.gamma=0.5] [--out DIR]
                       [--resume]
    xrisk compare RECIPE --methods ce,focal,pesg,soap,sopas [--seeds 3] [--out DIR]
    xrisk tune RECIPE --trials 20 [--out DIR]
    xrisk reproduce CLAIM [--seeds 3] [--framework jax]   # auroc | ap | pauc | ranking |
                                                          # gamma | gamma_ranking
                                                          # | gamma_contrastive | sampling
                                                          # | sampling_ranking | batch_size
                                                          # | contrastive | multilabel
                                                          # | convergence
    xrisk report RUN_DIR
    xrisk methods          # the methods, their defaults and search ranges
    xrisk recipes          # the shipped recipes

``RECIPE`` is a YAML file or the name of a shipped recipe. A bad recipe or option exits
with status 2 and a message naming the field, the value received and the fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xrisk", description="Train, compare, tune and report X-risk recipes.")
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser, metavar: str = "RECIPE",
               what: str = "a YAML recipe or a shipped recipe's name") -> None:
        sub.add_argument("recipe", metavar=metavar, help=what)
        sub.add_argument("--framework", choices=("torch", "tensorflow", "jax"))
        sub.add_argument("--seeds", type=int, help="run seeds 0..N-1")
        sub.add_argument("--epochs", type=int)
        sub.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                         help="override a recipe field, e.g. loss.gamma=0.5 (repeatable)")
        sub.add_argument("--out", help="run folder (default: runs/<recipe name>)")
        sub.add_argument("--quiet", action="store_true", help="no progress bar")

    train = commands.add_parser("train", help="train a recipe, every seed")
    common(train)
    train.add_argument("--resume", action="store_true",
                       help="continue the runs in --out from their last checkpoints")
    compare = commands.add_parser("compare", help="train a recipe with several methods")
    common(compare)
    compare.add_argument("--methods", required=True, help="comma-separated, e.g. ce,soap")
    compare.add_argument("--resume", action="store_true")
    tune = commands.add_parser("tune", help="search the method's hyper-parameters (Optuna)")
    common(tune)
    tune.add_argument("--trials", type=int, default=20)
    reproduce = commands.add_parser(
        "reproduce", help="X-risk against cross-entropy and focal loss on shipped data")
    common(reproduce, "CLAIM", "auroc (PESG, PDSCA), ap (SOAP) or pauc (SOPA, SOPAs), "
           "each against ce and focal; ranking (SONG, K-SONG against ListwiseCE and BCE on "
           "MovieLens); gamma (SOAP, SOPAs: gamma < 1 against 1), gamma_ranking (SONG's "
           "gamma0 < 1 against 1, MovieLens), gamma_contrastive (SogCLR's gamma < 1 against "
           "1, digits), sampling (PESG: DualSampler rates against the natural ratio), "
           "sampling_ranking (SONG: TriSampler's 1, 5, 10 rated items per user), "
           "batch_size (SOAP, gamma 0.9 and 1, batch 128 to 16); contrastive (SogCLR "
           "against InfoNCE, batch 16 and 128); "
           "multilabel (mAP, AUC-M, pAUC against BCE on all Tox21 assays); convergence (SOAP "
           "against CE and focal, training-split AP per epoch); 3 seeds")
    reproduce.add_argument("--resume", action="store_true")
    report = commands.add_parser("report", help="write report.md and figures of a run folder")
    report.add_argument("run_dir")
    commands.add_parser("methods", help="print the methods, defaults and search ranges")
    commands.add_parser("recipes", help="list the shipped recipes")
    return parser


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.set)
    if args.framework:
        out.append(f"framework={args.framework}")
    if args.seeds is not None:
        out.append(f"seeds={args.seeds}")
    if args.epochs is not None:
        out.append(f"epochs={args.epochs}")
    return out


def _out(args: argparse.Namespace, recipe_name: str) -> Path:
    return Path(args.out) if args.out else Path("runs") / recipe_name


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    from .recipe import RecipeError, builtin_recipes, load_recipe

    try:
        if args.command == "methods":
            from .methods import defaults_table

            print(defaults_table())
            return 0
        if args.command == "recipes":
            for name, path in builtin_recipes().items():
                print(f"{name}: {path}")
            return 0
        if args.command == "report":
            from .api import report

            print(report(args.run_dir))
            return 0
        progress = not args.quiet
        if args.command == "reproduce":
            from .api import reproduce

            out = Path(args.out) if args.out else Path("runs") / f"reproduce-{args.recipe}"
            reproduce(args.recipe, out, overrides=_overrides(args), resume=args.resume,
                      progress=progress)
            print(f"report: {out / 'report.md'}")
            return 0
        recipe = load_recipe(args.recipe, _overrides(args))
        out = _out(args, recipe.name)
        if args.command == "train":
            from .api import train

            results = train(recipe, out, resume=args.resume, progress=progress)
            for result in results:
                shown = "  ".join(f"{k} {v:.4f}" for k, v in result.test.items())
                print(f"seed {result.seed}: best epoch {result.best_epoch}, test {shown}")
        elif args.command == "compare":
            from .api import compare

            methods = [m.strip() for m in args.methods.split(",") if m.strip()]
            compare(recipe, methods, out, resume=args.resume, progress=progress)
        else:
            from .tune import tune

            best = tune(recipe, out, trials=args.trials, progress=progress)
            print(f"best validation {recipe.metric}: {best['value']:.4f} with {best['params']}")
        print(f"report: {out / 'report.md'}")
        return 0
    except (RecipeError, ValueError, FileExistsError, FileNotFoundError, ImportError) as error:
        # bad input (recipe, data file, run folder): the message says what and the fix
        print(f"xrisk {args.command}: {error}", file=sys.stderr)
        return 2
