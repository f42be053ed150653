#!/usr/bin/python3
"""Parses a Prometheus text exposition with the official client's parser and checks it.

    check_metrics.py FILE NODE [name{label="v"}=value ...]

Fails (exit 1, with the reason) if the text does not parse, if a counter's samples do not
end in _total, if a family has no TYPE, if a sample lacks the label node="NODE", if a
histogram's buckets are not cumulative or its +Inf bucket is not its _count, or if an
expected sample (named without the node label) is missing or differs.
Prints the number of families and samples when all is well."""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1]).read()
    samples = {}
    families = 0
    for fam in text_string_to_metric_families(text):
        families += 1
        if fam.type == "unknown":
            sys.exit(f"family {fam.name} has no TYPE")
        for s in fam.samples:
            if fam.type == "counter" and not s.name.endswith(("_total", "_created")):
                sys.exit(f"counter sample {s.name} does not end in _total")
            if s.labels.get("node") != sys.argv[2]:
                sys.exit(f"sample {s.name} {s.labels} does not carry node=\"{sys.argv[2]}\"")
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()) if k != "node")
            samples[s.name + (("{" + labels + "}") if labels else "")] = s.value
        if fam.type == "histogram":
            buckets = [s for s in fam.samples if s.name.endswith("_bucket")]
            count = [s.value for s in fam.samples if s.name.endswith("_count")]
            values = [b.value for b in buckets]
            if not buckets or values != sorted(values) or buckets[-1].labels["le"] != "+Inf":
                sys.exit(f"histogram {fam.name}: buckets not cumulative up to +Inf: {values}")
            if count != [values[-1]]:
                sys.exit(f"histogram {fam.name}: _count {count} is not the +Inf bucket")
    for want in sys.argv[3:]:
        key, value = want.rsplit("=", 1)
        if key not in samples:
            sys.exit(f"missing sample {key}")
        if float(value) != samples[key]:
            sys.exit(f"{key} is {samples[key]}, expected {value}")
    print(f"metrics ok: {families} families, {len(samples)} samples")


main()
