"""tools.measure.portability: the table of the ops that differ across processors and the demo run's times."""

from tools.measure import portability


def test_the_portability_table_names_the_differing_ops_and_the_run_times():
    values = {
        "ops": {"default": {"native": {}, "EPYC-v3": {}}, "portable": {"native": {}, "EPYC-v3": {}}},
        "differing": {"default": ["rsqrt", "sum_1m"], "portable": []},
        "demo_seconds": {"default": [90.0, 92.0, 100.0], "portable": [110.0, 108.0, 111.0]},
    }
    assert portability.render_portability(values).splitlines() == [
        "| XLA flags | ops with other bits on another processor (native, EPYC-v3) | demo run, median wall s |",
        "| --- | --- | --- |",
        "| XLA's defaults | rsqrt, sum_1m | 92.0 |",
        "| PORTABLE_FLAGS | none | 110.0 |",
    ]
