#!/usr/bin/python3
"""Helpers of tests/deploy/test_promtool.sh (Debian's python3: yaml, prometheus_client).

  promtool_rules.py names rules|dashboard FILE
      the metric names FILE's PromQL uses, one a line (alerts.yml: each rule's expr and
      the queries of its annotations; the dashboard: each target's expr and the
      template variables' queries)
  promtool_rules.py dashboard FILE
      checks the dashboard's shape; prints one problem a line, exits 1 if any
  promtool_rules.py unit-tests SCRAPE RULES INSTANCE OUTDIR
      writes OUTDIR/ALERT.yml, one promtool test rules file for each alert of RULES,
      whose input series are the scrape's own series (names and label sets, with the
      job and instance labels Prometheus adds) with values over time that fire the
      alert and that do not; prints the files' paths
"""
import json
import re
import sys

import yaml
from prometheus_client.parser import text_string_to_metric_families

# ---- metric names in PromQL ----------------------------------------------------------------
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression selects (not functions, keywords, labels)."""
    e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)  # strings
    e = re.sub(r'\$\{?\w+\}?', '1', e)  # Grafana's variables ($node, $__rate_interval)
    e = re.sub(r'\blabel_values\s*\((.*),\s*\w+\s*\)', r'(\1)', e)  # Grafana's: its label
    e = re.sub(r'\{[^}]*\}', ' ', e)  # label matchers
    e = re.sub(r'\[[^\]]*\]', ' ', e)  # ranges and subqueries
    e = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', e)
    names = set()
    for m in re.finditer(r'(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*', e):
        if e[m.end():].lstrip().startswith('('):
            continue  # a function (rate, sum, label_values ...)
        if m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def rules_exprs(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]
            # Queries run by the annotations' templates: {{ ... printf "QUERY" ... | query }}
            for text in (rule.get("annotations") or {}).values():
                for m in re.finditer(r'printf\s+"((?:\\.|[^"\\])*)"[^}]*\|\s*query', text):
                    yield m.group(1).replace('\\"', '"')


def dashboard_exprs(path):
    with open(path) as f:
        dash = json.load(f)
    for panel in all_panels(dash):
        for target in panel.get("targets", []):
            yield target.get("expr", "")
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var.get("query")
            yield q.get("query", "") if isinstance(q, dict) else (q or "")


def all_panels(dash):
    for panel in dash.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def check_dashboard(path):
    problems = []
    with open(path) as f:
        try:
            dash = json.load(f)
        except ValueError as e:
            return [f"not JSON: {e}"]
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 37:
        problems.append(f"schemaVersion {dash.get('schemaVersion')!r}, want 37 or later")
    for key in ("title", "uid"):
        if not dash.get(key):
            problems.append(f"no {key}")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no variable datasource of type datasource, query prometheus")
    node = variables.get("node")
    q = node and node.get("query")
    q = q.get("query") if isinstance(q, dict) else q
    if not node or not re.match(r'label_values\(gw_node_info\b.*,\s*node\)$', q or ""):
        problems.append("no variable node from label_values(gw_node_info, node)")
    panels = list(all_panels(dash))
    if not panels:
        problems.append("no panels")
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        problems.append("panel ids repeat")
    for p in panels:
        name = p.get("title") or f"panel {p.get('id')}"
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{name}: no targets")
        for t in targets:
            if not t.get("expr") or not t.get("refId"):
                problems.append(f"{name}: a target without expr or refId")
            elif "$node" not in t["expr"]:
                problems.append(f"{name}: {t['expr']} is not per $node")
        if (p.get("datasource") or {}).get("uid") != "${datasource}":
            problems.append(f"{name}: not on the datasource variable")
    return problems


# ---- promtool test rules from a scrape ---------------------------------------------------
# For each alert: the scraped metric it watches (and which of its series), then cases:
# values of that series a minute apart from 0m, the time the alert is evaluated, and the
# alert expected then (None: none). "up" is Prometheus' own, one a target; "node_info"
# adds the scrape's gw_node_info with those values. In expected annotations, {node} and
# {instance} are the series' labels.
CASES = {
    "GwDatabaseUnreachable": {
        "metric": "gw_store_connected",
        "cases": [
            ("connection lost at 2m", "1 1 0x10", "10m", {
                "summary": "gw node {node} cannot reach its database",
                "description": "Node {node} ({instance}) has had no connection to its store for "
                               "more than a minute: sign-ins and sends on it fail. Check the "
                               "database (Patroni's leader, the primary's log, the network from "
                               "the node) and the node's log; it reconnects by itself once the "
                               "database is back."}),
            ("connected throughout", "1x12", "10m", None),
            ("lost at 10m: not for a minute yet", "1x9 0 0", "10m", None),
        ],
    },
    "GwNotifyQueueHigh": {
        "metric": "gw_notify_queue_usage",
        "cases": [
            ("60% from 2m", "0 0.2 0.6x10", "10m", {
                "summary": "PostgreSQL notification queue 60% full (seen by gw node {node})",
                "description": "The database's notification queue has been above 50% for a "
                               "minute, as node {node} ({instance}) reads it: a listener does "
                               "not read. Look at pg_stat_activity where application_name LIKE "
                               "'gw-feed%' for a blocked listener and end it "
                               "(pg_terminate_backend); at 100% joins and leaves fail."}),
            ("exactly 50% throughout", "0.5x12", "10m", None),
            ("90% at 10m: not for a minute yet", "0x9 0.9 0.9", "10m", None),
        ],
    },
    "GwCommitLatencyHigh": {
        "metric": "gw_store_commit_duration_seconds",
        "select": {"quantile": "0.99"},
        # The scrape's other quantiles stay low beside it.
        "others": "0.005x12",
        "cases": [
            ("p99 250 ms from 1m", "0.02 0.25x11", "10m", {
                "summary": "gw node {node}: store commit p99 250ms",
                "description": "Node {node} ({instance}) has taken more than 100 ms for 1% of "
                               "its commits for five minutes: every message waits for its commit "
                               "before it is confirmed. Look at the database (a slow synchronous "
                               "standby, fsync, the network between them) and at "
                               "gw_store_queue_length."}),
            ("p99 exactly 100 ms throughout", "0.1x12", "10m", None),
            ("p99 250 ms from 7m: not for five minutes yet", "0.02x6 0.25x5", "10m", None),
        ],
    },
    "GwNodeDown": {
        "metric": "up",
        "cases": [
            ("down at 2m, its name known", "1 1 0x10", "10m", {
                "summary": "gw node {instance} is not reporting",
                "description": "Prometheus has not scraped {instance} (node {node}) for a "
                               "minute: its sessions reconnect to the other nodes. Check the "
                               "process (systemctl status gw), its log and /healthz on the "
                               "node's address."}, {"node_info": "1 1 stale"}),
            ("down from the start, never scraped", "0x12", "10m", {
                "summary": "gw node {instance} is not reporting",
                "description": "Prometheus has not scraped {instance} (node unknown) for a "
                               "minute: its sessions reconnect to the other nodes. Check the "
                               "process (systemctl status gw), its log and /healthz on the "
                               "node's address."}, {}),
            ("up throughout", "1x12", "10m", None, {"node_info": "1x12"}),
            ("down at 10m: not for a minute yet", "1x9 0 0", "10m", None,
             {"node_info": "1x9 stale"}),
        ],
    },
    "GwNoNodes": {
        "metric": "up",
        "absent": True,  # the alert's labels are the selector's: job="gw"
        "cases": [
            ("the only target gone at 2m", "1 1 stale", "10m", {
                "summary": "No gw node is being scraped",
                "description": "Prometheus has had no target in the job gw for five minutes, "
                               "so no other gw alert can fire. Check the scrape configuration "
                               "(job_name: gw) and its targets."}),
            ("scraped throughout", "1x12", "10m", None),
            ("gone at 8m: not for five minutes yet", "1x7 stale", "10m", None),
        ],
    },
    "GwWebhookDropped": {
        "metric": "gw_webhook_dropped_total",
        "cases": [
            ("5 dropped at 4m", "0 0 0 0 5x8", "10m", {
                "summary": "gw node {node} dropped unread webhook events",
                "description": "Node {node} ({instance}) dropped about 5 unread events in the "
                               "last ten minutes: its webhook queue (--webhook-queue) was full. "
                               "The receiver is down or slower than the events come "
                               "(gw_webhook_failures_total, gw_webhook_last_status): fix it, or "
                               "give the queue more room."}),
            ("3 dropped long ago, none since", "3x12", "10m", None),
            ("none dropped", "0x12", "10m", None),
        ],
    },
    "GwLoopStalls": {
        "metric": "gw_loop_stall_recent_seconds",
        "cases": [
            ("250 ms stalls from 2m", "0.001 0.002 0.25x10", "10m", {
                "summary": "gw node {node}: event loop iterations of 250ms",
                "description": "Node {node} ({instance}) has had a loop iteration of 100 ms or "
                               "more in every window of the last five minutes: its sessions wait "
                               "that long for pushes and replies. Look at its CPU (another process "
                               "on its cores, too few --threads for its sessions), at "
                               "gw_loop_iteration_seconds, and at what it was asked to do then "
                               "(large pages, many sign-ins at once)."}),
            ("exactly 100 ms throughout", "0.1x12", "10m", None),
            ("250 ms from 7m: not for five minutes yet", "0.002x6 0.25x5", "10m", None),
        ],
    },
    "GwShardUnwritable": {
        "metric": "gw_store_shards_unwritable",
        "cases": [
            ("one shard away from 2m", "0 0 1x10", "10m", {
                "summary": "gw node {node}: 1 shard(s) take no writes",
                "description": "Node {node} ({instance}) has had 1 shard(s) not taking writes "
                               "for a minute: the groups of their slots refuse writes and every "
                               "sign-in is refused until they are back. Find the shard in the "
                               "node's log (lines start \"shard I:\") and look at its Patroni "
                               "pair (the leader, the primary's log, the network from the "
                               "node)."}),
            ("every shard writable throughout", "0x12", "10m", None),
            ("one away at 10m: not for a minute yet", "0x9 1 1", "10m", None),
        ],
    },
}


def scrape_series(path):
    """{name: [labels dict, ...]} of every sample in the scrape."""
    out = {}
    with open(path) as f:
        for family in text_string_to_metric_families(f.read()):
            for s in family.samples:
                out.setdefault(s.name, []).append(dict(s.labels))
    return out


def series_text(name, labels):
    esc = lambda v: v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return name + "{" + ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items())) + "}"


def unit_tests(scrape, rules_path, instance, outdir):
    series = scrape_series(scrape)
    with open(rules_path) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "alert" in r]
    target = {"job": "gw", "instance": instance}  # what Prometheus adds to the node's samples
    node = series["gw_node_info"][0]["node"]
    paths = []
    for rule in rules:
        name = rule["alert"]
        spec = CASES.get(name)
        if spec is None:
            sys.exit(f"no cases for alert {name}: add them to CASES in {__file__}")
        metric = spec["metric"]
        if metric == "up":  # one a target, with the target's labels only
            watched, others = dict(target), []
        else:
            if metric not in series:
                sys.exit(f"{name}: {metric} is not in the scrape")
            sel = spec.get("select", {})
            matching = [l for l in series[metric] if all(l.get(k) == v for k, v in sel.items())]
            if len(matching) != 1:
                sys.exit(f"{name}: {len(matching)} series of {metric} match {sel}")
            watched = {**matching[0], **target}
            others = [{**l, **target} for l in series[metric] if l is not matching[0]]
        tests = []
        for case in spec["cases"]:
            what, values, at, expect = case[:4]
            extra = case[4] if len(case) > 4 else {}
            inputs = [{"series": series_text(metric, watched), "values": values}]
            inputs += [{"series": series_text(metric, l), "values": spec["others"]} for l in others]
            if "node_info" in extra:
                for l in series["gw_node_info"]:
                    inputs.append({"series": series_text("gw_node_info", {**l, **target}),
                                   "values": extra["node_info"]})
            exp = []
            if expect is not None:
                labels = {"job": "gw"} if spec.get("absent") else dict(watched)
                labels.update(rule.get("labels") or {})
                fill = {"node": node, "instance": instance}
                exp = [{"exp_labels": labels,
                        "exp_annotations": {k: v.format(**fill) for k, v in expect.items()}}]
            tests.append({
                "name": f"{name}: {what}: {'fires' if exp else 'quiet'} at {at}",
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": exp}],
            })
        if not any(t["alert_rule_test"][0]["exp_alerts"] for t in tests) or \
                all(t["alert_rule_test"][0]["exp_alerts"] for t in tests):
            sys.exit(f"{name}: needs a case that fires and one that does not")
        path = f"{outdir}/{name}.yml"
        with open(path, "w") as f:
            yaml.safe_dump({"rule_files": [rules_path], "evaluation_interval": "1m",
                            "tests": tests}, f, sort_keys=False, width=100)
        paths.append(path)
    print("\n".join(paths))


def main(argv):
    if len(argv) == 3 and argv[0] == "names" and argv[1] in ("rules", "dashboard"):
        exprs = rules_exprs(argv[2]) if argv[1] == "rules" else dashboard_exprs(argv[2])
        print("\n".join(sorted(set().union(*map(metric_names, exprs)))))
    elif len(argv) == 2 and argv[0] == "dashboard":
        problems = check_dashboard(argv[1])
        for p in problems:
            print(p)
        return 1 if problems else 0
    elif len(argv) == 5 and argv[0] == "unit-tests":
        unit_tests(*argv[1:])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
