"""Layers: one module per family, all built on :class:`distconv.layers.base.Layer`."""

from distconv.layers.activation import Activation
from distconv.layers.base import Layer, LayerError
from distconv.layers.concat import Concatenate, Concatenate2
from distconv.layers.context import ContextProjection
from distconv.layers.conv import (
    Conv2D,
    Conv3D,
    ConvProjection,
    ConvTranspose2D,
    ConvTranspose3D,
    ConvTransposeProjection,
)
from distconv.layers.dropout import Dropout
from distconv.layers.expand import FeatureMapExpand
from distconv.layers.fc import FullyConnected
from distconv.layers.loss import MSELoss, SoftmaxCrossEntropy
from distconv.layers.mixed import Mixed
from distconv.layers.multiplex import Multiplex
from distconv.layers.operator import ConvOperator, DotMulOperator
from distconv.layers.pool import AvgPool2D, AvgPool3D, MaxPool2D, MaxPool3D
from distconv.layers.projection import (
    DotMulProjection,
    FullMatrixProjection,
    IdentityProjection,
    ScalingProjection,
    SliceProjection,
    TableProjection,
    TransposedFullMatrixProjection,
)
from distconv.layers.reshape import Reshape
from distconv.layers.selective_fc import SelectiveFullyConnected
from distconv.layers.sequence import SequenceConcat
from distconv.layers.sequence_pool import SequencePool

__all__ = [
    "Activation",
    "AvgPool2D",
    "AvgPool3D",
    "Concatenate",
    "Concatenate2",
    "ContextProjection",
    "Conv2D",
    "Conv3D",
    "ConvOperator",
    "ConvProjection",
    "ConvTranspose2D",
    "ConvTranspose3D",
    "ConvTransposeProjection",
    "DotMulOperator",
    "DotMulProjection",
    "Dropout",
    "FeatureMapExpand",
    "FullMatrixProjection",
    "FullyConnected",
    "IdentityProjection",
    "Layer",
    "LayerError",
    "MSELoss",
    "MaxPool2D",
    "MaxPool3D",
    "Mixed",
    "Multiplex",
    "Reshape",
    "ScalingProjection",
    "SelectiveFullyConnected",
    "SequenceConcat",
    "SequencePool",
    "SliceProjection",
    "SoftmaxCrossEntropy",
    "TableProjection",
    "TransposedFullMatrixProjection",
]
