"""Layers: one module per family, all built on :class:`distconv.layers.base.Layer`."""

from distconv.layers.activation import Activation
from distconv.layers.base import Layer, LayerError
from distconv.layers.conv import Conv2D, Conv3D, ConvTranspose2D, ConvTranspose3D
from distconv.layers.fc import FullyConnected
from distconv.layers.loss import MSELoss, SoftmaxCrossEntropy
from distconv.layers.pool import AvgPool2D, AvgPool3D, MaxPool2D, MaxPool3D

__all__ = [
    "Activation",
    "AvgPool2D",
    "AvgPool3D",
    "Conv2D",
    "Conv3D",
    "ConvTranspose2D",
    "ConvTranspose3D",
    "FullyConnected",
    "Layer",
    "LayerError",
    "MSELoss",
    "MaxPool2D",
    "MaxPool3D",
    "SoftmaxCrossEntropy",
]
