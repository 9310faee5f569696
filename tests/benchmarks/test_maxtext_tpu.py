"""benchmarks.maxtext_tpu: MaxText's printed analyses read, and the ratios of our plans to its program."""

import json

import pytest

from benchmarks import maxtext_tpu

# The two lines MaxText 0.2.5's train_compile prints after compiling (values of its llama3.1-8b on v5p-128).
LOG = """Finished train_compile.py successfully!
Cost analysis: {'utilization891{}': 1.0, 'flops': 226469850644480.0, 'bytes accessed': 406199631872.0, 'optimal_seconds': 0.6774429082870483}
Memory analysis: CompiledMemoryStats(generated_code_size_in_bytes=1008117248, argument_size_in_bytes=1508905472, output_size_in_bytes=1508832768, alias_size_in_bytes=1508823552, temp_size_in_bytes=15993594848, host_generated_code_size_in_bytes=0, host_argument_size_in_bytes=0, host_output_size_in_bytes=0, host_alias_size_in_bytes=0, host_temp_size_in_bytes=0)
"""


HLO = """  %all-gather.1 = bf16[4096,1024]{1,0} all-gather(bf16[64,1024]{1,0} %p), dimensions={0}
  %all-reduce.2 = f32[1024]{0} all-reduce(f32[1024]{0} %g), to_apply=%add
"""


def test_maxtext_values_are_read_from_its_printed_analyses_and_program():
    values = maxtext_tpu.maxtext_values(LOG, HLO)
    assert values["collectives"] == {
        "all-gather": {"ops": 1, "gb": 4096 * 1024 * 2 / 1e9},
        "all-reduce": {"ops": 1, "gb": 1024 * 4 / 1e9},
    }
    assert values["temps_gb"] == pytest.approx(15.993594848)
    # arguments + outputs - aliased (the donated state) + temporaries
    assert values["total_gb"] == pytest.approx((1508905472 + 1508832768 - 1508823552 + 15993594848) / 1e9)
    assert (values["flops"], values["optimal_seconds"]) == (226469850644480.0, 0.6774429082870483)
    with pytest.raises(ValueError, match="no memory or cost analysis"):
        maxtext_tpu.maxtext_values(LOG.splitlines()[0], HLO)


def test_the_ratios_give_maxtext_our_attention_seconds(tmp_path):
    plan = {"params_gb": 0.5, "optimizer_gb": 1.0, "temps_gb": 24.0, "total_gb": 26.0}
    path = tmp_path / "plan.json"
    collectives = {"all-reduce": {"ops": 3, "gb": 1.5}}
    path.write_text(
        json.dumps([{**plan, "est_step_seconds": 1.0, "attention_seconds": 0.25, "collectives": collectives}])
    )
    ours = maxtext_tpu.ours_values(str(path))
    assert ours["collectives"] == collectives
    record = maxtext_tpu.compare(maxtext_tpu.maxtext_values(LOG, HLO), ours, {**ours, "temps_gb": 32.0})
    assert record["maxtext"]["est_step_seconds"] == pytest.approx(0.6774429082870483 + 0.25)
    assert record["ratios"]["ours_llama"]["temps_gb"] == pytest.approx(24.0 / 15.993594848)
    assert record["ratios"]["ours_apertus"]["temps_gb"] == pytest.approx(32.0 / 15.993594848)
    assert record["ratios"]["ours_llama"]["est_step_seconds"] == pytest.approx(
        1.0 / (0.6774429082870483 + 0.25)
    )
