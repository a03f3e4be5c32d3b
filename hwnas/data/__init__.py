"""Datasets for training and evaluation: scikit-learn's digits (ships in its wheel), image folders; splits; loaders.

Everything here is plain data (a pydantic config, numpy arrays), so a :class:`DataSource` can be sent to a
worker process and loads its images there.
"""

from hwnas.data.datasets import DataConfig, DataSource, ImageData, describe, load

__all__ = ["DataConfig", "DataSource", "ImageData", "describe", "load"]
