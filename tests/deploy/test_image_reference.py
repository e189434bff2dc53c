"""``--image`` is checked by the grammar the kubelet parses an image with: one it cannot parse
(``Distconv:0.1.0``, a repository in capitals) rendered, and every pod of the job failed with
InvalidImageName after the job was applied."""

from __future__ import annotations

import pytest

from distconv.deploy import render_manifests

pytestmark = pytest.mark.timeout(60)

GOOD = [
    "distconv:0.1.0",
    "distconv:0.1.0-cuda12",
    "d:1",
    "x",
    "registry.example.com/ml/distconv:0.1.0",
    "localhost:5000/ml/distconv:0.1.0",
    "MyRegistry.example.com/ml/distconv:v1",  # a registry's host name may have capitals
    "[::1]:5000/distconv:0.1.0",
    "ghcr.io/a-b/c__d/e.f:V1.2_3",  # so may a tag
    "nvcr.io/nvidia/cuda:12.6.3-runtime-ubuntu24.04",
    "distconv@sha256:" + "0" * 64,
    "reg.io/distconv:0.1.0@sha256:" + "a" * 64,
    "distconv@sha512:" + "0" * 128,
    "reg.io/distconv@sha384:" + "f" * 96,
    "reg.io/" + "a" * 255,  # a repository path of 255 characters, the registry not counted
]
BAD = [
    "Distconv:0.1.0",  # a repository is lower case
    "ml/Distconv:0.1.0",
    "distconv:",  # an empty tag
    "distconv:-1",  # a tag starts with a word character
    "distconv:0.1:0",
    "/distconv",
    "distconv/",
    "distconv@sha256:xyz",
    "distconv:0.1.0@",
    # go-digest, which the parser validates a digest with: sha256/384/512, lower-case hex of
    # the algorithm's length
    "distconv@sha256:" + "A" * 64,
    "distconv@sha256:" + "0" * 32,
    "distconv@sha256:" + "0" * 65,
    "distconv@md5:" + "0" * 32,
    "0" * 64,  # an image ID: "cannot specify 64-byte hexadecimal strings"
    "[::ffff:10.0.0.1]:5000/distconv",  # an IPv6 registry is hex digits and colons
    "reg.io/" + "a" * 256,  # a repository path over 255 characters
    "a" * 248,  # 256 as docker.io/library/aaa...
]


@pytest.mark.parametrize("image", GOOD)
def test_an_image_reference_renders(image):
    objs = render_manifests(job_name="j", workers=1, servers=1, image=image)
    assert {c["image"] for o in objs[1:] for c in o["spec"]["template"]["spec"]["containers"]} == {
        image
    }


@pytest.mark.parametrize("image", BAD)
def test_what_the_kubelet_cannot_parse_is_refused_naming_the_flag(image):
    with pytest.raises(ValueError, match="--image must be an image reference") as caught:
        render_manifests(job_name="j", workers=1, servers=0, image=image)
    assert repr(image) in str(caught.value) and "lower case" in str(caught.value)
