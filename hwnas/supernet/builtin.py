"""Imports the shipped supernets so they register (each imports torch and timm: import this only when needed)."""

from hwnas.supernet import cells as _cells  # noqa: F401  (registers "nb201", "darts")
from hwnas.supernet import convnext as _convnext  # noqa: F401  (registers "convnext")
from hwnas.supernet import fbnet as _fbnet  # noqa: F401  (registers "fbnet")
from hwnas.supernet import ofa_mbv3 as _ofa_mbv3  # noqa: F401  (registers "ofa_mbv3", "mbv3")
from hwnas.supernet import vit as _vit  # noqa: F401  (registers "vit")
