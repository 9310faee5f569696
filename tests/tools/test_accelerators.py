"""tools.measure.accelerators: the table of the Apertus runs on their targets."""

from tools.measure import accelerators


def test_the_targets_table_gives_gb_against_hbm_and_names_a_refusal():
    fits = {
        "devices": 4,
        "mesh": "1x4x1",
        "microbatches": 512,
        "rows": 4,
        "params_gb": 8.05,
        "optimizer_gb": 24.16,
    }
    fits |= {"temps_gb": 33.74, "total_gb": 66.0, "hbm_gb": 95.0, "fits": True, "kernels": "splash_mha_fwd"}
    refused = {**fits, "temps_gb": None, "total_gb": None, "fits": False, "kernels": ""}
    refused["oom"] = (
        "RESOURCE_EXHAUSTED: Allocation (size=8388608) would exceed memory (size=1048576) :: #allocation3 "
        "[shape = 'u8[8388608]{0}', space=smem, size = 0x800000, scoped]"
    )
    values = {name: fits for name, *_ in accelerators.APERTUS_TARGETS}
    values["8b_v5p_8"] = {**fits, "est_step_seconds": 335.6, "est_mfu": 0.7028}
    values["8b_256k_v5p_16"] = refused
    values["8b_h100_1x4"] = {**fits, "kernels": "__cudnn$fmhaScaleBiasSoftmax"}
    rows = {row.split(" | ")[0] + " " + row.split(" | ")[1]: row for row in
            accelerators.render_apertus_targets(values).splitlines()[2:]}  # fmt: skip
    assert len(rows) == len(accelerators.APERTUS_TARGETS)  # one row per run and target
    assert (
        rows["| 8B v5p-8"]
        == "| 8B | v5p-8 | 1x4x1 | 512 x 4 | 8.1 | 24.2 | 33.7 | 66.0 / 95 | splash | 336 | 70% |"
    )
    assert rows["| 8B h100:1x4"].endswith("| 66.0 / 95 | cuDNN |  |  |")
    assert rows["| 8B, 256k stage v5p-16"].endswith("|  | refused: 8 MiB > 1 MiB of SMEM |  |  |  |")
