"""benchmarks.kernel_timing (the measurement of benchmarks.attention_kernels) on CPU: the packed layout of segment ids, the xla kernel against the float32
reference, a kernel that cannot run here reported with its error, unknown kernel names refused."""

import numpy as np
import pytest

from benchmarks import kernel_timing
from benchmarks.packed_rows import packed_layout, packed_segment_ids


def test_packed_layout_gives_each_documents_start_and_length():
    offsets, lengths = packed_layout(np.array([[1, 1, 2, 2, 2, 3, 0, 0], [1, 2, 2, 2, 2, 2, 2, 0]]))
    assert offsets.tolist() == [[0, 2, 5, -1], [0, 1, -1, -1]]
    assert lengths.tolist() == [[2, 3, 1], [1, 6, -1]]


@pytest.mark.parametrize("seq", [256, 2048])
def test_packed_layout_rebuilds_the_segment_ids_of_packed_rows(seq):
    segment_ids = packed_segment_ids(3, seq, max_document=seq // 4)
    offsets, lengths = packed_layout(segment_ids)
    rebuilt = np.zeros_like(segment_ids)
    for r in range(len(segment_ids)):
        for m, (start, length) in enumerate(zip(offsets[r], lengths[r])):
            if length > 0:
                rebuilt[r, start : start + length] = m + 1
    np.testing.assert_array_equal(rebuilt, segment_ids)
    assert (lengths > 0).sum(axis=1).tolist() == segment_ids.max(axis=1).tolist()


def test_the_xla_kernel_matches_the_reference_and_a_missing_kernel_is_reported():
    report = kernel_timing.run("tiny", 256, 2, 1, kernels=("xla", "cudnn_packed"))
    assert report["documents_per_row"] >= 2
    errors = report["kernels"]["xla"]["relative_error"]
    # bf16 inputs against their float32 evaluation: bf16 rounding of the output and gradients only
    assert set(errors) == {"out", "dq", "dk", "dv"} and max(errors.values()) < 0.01
    assert report["kernels"]["xla"]["ms"] > 0
    assert set(report["kernels"]["cudnn_packed"]) == {"error"}  # no cuDNN on a CPU


def test_unknown_kernels_are_refused_before_anything_runs():
    with pytest.raises(ValueError, match="--kernels: unknown flash; choose from xla, cudnn_mask"):
        kernel_timing.run("tiny", 256, 1, 1, kernels=("xla", "flash"))
