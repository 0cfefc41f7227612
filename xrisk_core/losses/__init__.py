"""Loss definitions and the registry of every loss.

Adding a loss: write its definition module here and add it to :data:`LOSSES`; each adapter
(torch, TensorFlow, JAX) then holds one short class of the same name and signature, which
``tests/test_api.py`` checks against the registry.
"""

from ._base import (
    INPUT_KINDS,
    NO_PARAMS,
    ROLES,
    Auxiliary,
    Domain,
    Input,
    LossDefinition,
    NoParams,
    NoState,
    Relation,
    Size,
    StateTable,
    Step,
)
from .ap import APLoss, APState
from .auc import AUCMLoss, AUCMParams
from .classification import (
    CompositionalAUCLoss,
    CompositionalAUCState,
    CrossEntropyLoss,
    FocalLoss,
    PairwiseAUCLoss,
)
from .contrastive import (
    BimodalContrastiveLoss,
    BimodalContrastiveState,
    BimodalIndividualState,
    GlobalContrastiveLoss,
    GlobalContrastiveState,
    IndividualContrastiveState,
    InfoNCELoss,
    gamma_at,
)
from .extreme import EXTREME_MODES, EntLossClassification, EntLossClassificationState
from .midam import (
    MIDAM_attention_pooling_loss,
    MIDAM_attention_pooling_State,
    MIDAM_softmax_pooling_loss,
    MIDAM_softmax_pooling_State,
    MIDAMLoss,
)
from .multilabel import (
    MultiLabelAUCMLoss,
    MultiLabelAUCMParams,
    MultiLabelpAUCLoss,
    meanAveragePrecisionLoss,
)
from .pauc import (
    pAUC_CVaR_Loss,
    pAUC_CVaR_State,
    pAUC_DRO_Loss,
    pAUC_DRO_State,
    pAUCLoss,
    tpAUC_CVaR_Loss,
    tpAUC_CVaR_State,
    tpAUC_KL_Loss,
    tpAUC_KL_State,
)
from .ranking import KSONGState, ListwiseCELoss, ListwiseCEState, NDCGLoss, NDCGState

__all__ = [
    "BimodalContrastiveLoss",
    "BimodalContrastiveState",
    "BimodalIndividualState",
    "GlobalContrastiveLoss",
    "GlobalContrastiveState",
    "IndividualContrastiveState",
    "InfoNCELoss",
    "gamma_at",
    "LOSSES",
    "MultiLabelAUCMLoss",
    "MultiLabelAUCMParams",
    "MultiLabelpAUCLoss",
    "meanAveragePrecisionLoss",
    "INPUT_KINDS",
    "NO_PARAMS",
    "ROLES",
    "Auxiliary",
    "Domain",
    "Input",
    "Relation",
    "Size",
    "LossDefinition",
    "NoParams",
    "NoState",
    "StateTable",
    "Step",
    "APLoss",
    "APState",
    "AUCMLoss",
    "AUCMParams",
    "CompositionalAUCLoss",
    "CompositionalAUCState",
    "CrossEntropyLoss",
    "FocalLoss",
    "PairwiseAUCLoss",
    "pAUC_CVaR_Loss",
    "pAUC_CVaR_State",
    "pAUC_DRO_Loss",
    "pAUC_DRO_State",
    "pAUCLoss",
    "tpAUC_CVaR_Loss",
    "tpAUC_CVaR_State",
    "tpAUC_KL_Loss",
    "tpAUC_KL_State",
    "EXTREME_MODES",
    "EntLossClassification",
    "EntLossClassificationState",
    "MIDAMLoss",
    "MIDAM_attention_pooling_loss",
    "MIDAM_attention_pooling_State",
    "MIDAM_softmax_pooling_loss",
    "MIDAM_softmax_pooling_State",
    "ListwiseCELoss",
    "ListwiseCEState",
    "KSONGState",
    "NDCGLoss",
    "NDCGState",
]

#: Every loss definition, by public class name.
LOSSES: dict[str, type[LossDefinition]] = {
    "APLoss": APLoss,
    "AUCMLoss": AUCMLoss,
    "PairwiseAUCLoss": PairwiseAUCLoss,
    "CrossEntropyLoss": CrossEntropyLoss,
    "FocalLoss": FocalLoss,
    "CompositionalAUCLoss": CompositionalAUCLoss,
    "pAUC_CVaR_Loss": pAUC_CVaR_Loss,
    "pAUC_DRO_Loss": pAUC_DRO_Loss,
    "tpAUC_KL_Loss": tpAUC_KL_Loss,
    "tpAUC_CVaR_Loss": tpAUC_CVaR_Loss,
    "MIDAM_softmax_pooling_loss": MIDAM_softmax_pooling_loss,
    "MIDAM_attention_pooling_loss": MIDAM_attention_pooling_loss,
    "EntLossClassification": EntLossClassification,
    "MultiLabelAUCMLoss": MultiLabelAUCMLoss,
    "meanAveragePrecisionLoss": meanAveragePrecisionLoss,
    "MultiLabelpAUCLoss": MultiLabelpAUCLoss,
    "ListwiseCELoss": ListwiseCELoss,
    "NDCGLoss": NDCGLoss,
    "GlobalContrastiveLoss": GlobalContrastiveLoss,
    "BimodalContrastiveLoss": BimodalContrastiveLoss,
    "InfoNCELoss": InfoNCELoss,
}
