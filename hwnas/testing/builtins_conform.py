"""Every built-in component satisfies the protocol its registry is typed with: read by the type checker alone.

The built-ins are imported lazily by name, so nothing else makes ``mypy`` compare them with their protocol; here each
is assigned to its registry's ``type[Protocol]``, and one that drifts from it (a method missing or of another
signature, a read-write attribute of a narrower type) fails ``mypy`` naming the member. Nothing is imported at run
time. ``tests/test_registry.py`` checks that every built-in of every registry is listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.evaluation import Evaluator
    from hwnas.evaluators.benchmark import BenchmarkEvaluator
    from hwnas.evaluators.complexity import ComplexityEvaluator
    from hwnas.evaluators.function import FunctionEvaluator
    from hwnas.evaluators.latency_table import LatencyModelEvaluator, LatencyTableEvaluator
    from hwnas.evaluators.memory import MemoryEvaluator
    from hwnas.evaluators.ort_latency import OrtLatencyEvaluator
    from hwnas.evaluators.predictor import PredictorEvaluator
    from hwnas.evaluators.supernet import SupernetEvaluator
    from hwnas.evaluators.train import TrainEvaluator
    from hwnas.evaluators.zero_cost import ZeroCostEvaluator
    from hwnas.experiments.executors.base import Executor
    from hwnas.experiments.executors.local import LocalExecutor
    from hwnas.experiments.executors.process import ProcessExecutor
    from hwnas.experiments.executors.ray import RayExecutor
    from hwnas.latency.backends.base import LatencyBackend
    from hwnas.latency.backends.onnxruntime_backend import OnnxRuntimeBackend
    from hwnas.latency.backends.tensorrt_backend import TensorRTBackend
    from hwnas.latency.backends.torch_backend import TorchBackend
    from hwnas.latency.backends.trtexec_backend import TrtexecBackend
    from hwnas.predictors.base import Predictor
    from hwnas.predictors.ensemble import EnsemblePredictor
    from hwnas.predictors.gbt import GBTPredictor
    from hwnas.predictors.gin import GINPredictor
    from hwnas.predictors.gp import GPPredictor
    from hwnas.predictors.linear import LinearPredictor
    from hwnas.predictors.mlp import MLPPredictor
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.convnext import ConvNeXtSpace
    from hwnas.search_spaces.darts import DartsSpace
    from hwnas.search_spaces.fbnet import FBNetSpace
    from hwnas.search_spaces.mbv3 import MobileNetV3Space
    from hwnas.search_spaces.nb201 import NB201Space
    from hwnas.search_spaces.ofa import OFAMobileNetV3Space
    from hwnas.search_spaces.vit import ViTSpace
    from hwnas.strategies.base import Strategy
    from hwnas.strategies.bayes_opt import BayesOpt
    from hwnas.strategies.differentiable import Darts, FBNet, Gdas, PCDarts, Proxyless
    from hwnas.strategies.evolution import RegularizedEvolution
    from hwnas.strategies.local_search import LocalSearch
    from hwnas.strategies.oneshot import OneShotStrategy
    from hwnas.strategies.optuna_search import OptunaSearch
    from hwnas.strategies.predictor_guided import PredictorGuided
    from hwnas.strategies.pymoo_algorithms import AGEMOEAStrategy, NSGA2Strategy, NSGA3Strategy, SMSEMOAStrategy
    from hwnas.strategies.random_search import RandomSearch
    from hwnas.strategies.reinforce import Reinforce
    from hwnas.supernet.base import Supernet
    from hwnas.supernet.cells import DartsSupernet, NB201Supernet
    from hwnas.supernet.convnext import ConvNeXtSupernet
    from hwnas.supernet.fbnet import FBNetSupernet
    from hwnas.supernet.ofa_mbv3 import MobileNetV3Supernet, OFAMobileNetV3Supernet
    from hwnas.supernet.vit import ViTSupernet

    SPACES: list[type[SearchSpace]] = [
        ConvNeXtSpace, DartsSpace, FBNetSpace, MobileNetV3Space, NB201Space, OFAMobileNetV3Space, ViTSpace
    ]
    STRATEGIES: list[type[Strategy]] = [
        AGEMOEAStrategy, BayesOpt, RegularizedEvolution, LocalSearch, NSGA2Strategy, NSGA3Strategy, OptunaSearch,
        PredictorGuided, RandomSearch, Reinforce, SMSEMOAStrategy
    ]
    ONE_SHOT_STRATEGIES: list[type[OneShotStrategy]] = [Darts, FBNet, Gdas, PCDarts, Proxyless]
    EVALUATORS: list[type[Evaluator]] = [
        BenchmarkEvaluator, ComplexityEvaluator, FunctionEvaluator, LatencyModelEvaluator, LatencyTableEvaluator,
        MemoryEvaluator, OrtLatencyEvaluator, PredictorEvaluator, SupernetEvaluator, TrainEvaluator, ZeroCostEvaluator
    ]
    EXECUTORS: list[type[Executor]] = [LocalExecutor, ProcessExecutor, RayExecutor]
    PREDICTORS: list[type[Predictor]] = [EnsemblePredictor, GBTPredictor, GINPredictor, GPPredictor, LinearPredictor,
                                        MLPPredictor]
    SUPERNETS: list[type[Supernet]] = [
        ConvNeXtSupernet, DartsSupernet, FBNetSupernet, MobileNetV3Supernet, NB201Supernet, OFAMobileNetV3Supernet,
        ViTSupernet
    ]
    BACKENDS: list[type[LatencyBackend]] = [OnnxRuntimeBackend, TensorRTBackend, TorchBackend, TrtexecBackend]
