#!/usr/bin/env bash
# Static checks of deploy/: the Prometheus rules and their unit tests, the
# metric names they and the dashboard use, the Grafana dashboard, the systemd
# unit, the Kubernetes manifests, the PostgreSQL settings, the Containerfile's
# inputs, the example configurations in config/ (when walrelay is built),
# and, when the test environment's PostgreSQL runs, outbox_emit.sql,
# outbox_poll.sql and outbox_notify.sql for real. Prints one line per check
# and exits 1 if any failed.
#
# Usage: scripts/check-deploy.sh
#
# Tools come from Debian when missing: promtool is extracted from the
# `prometheus` package into .cache/deploy-tools/ (installing the package would
# also start a Prometheus server); systemd-analyze (`systemd`) and PyYAML
# (`python3-yaml`) are installed with apt-get, which needs root. Later runs
# find them and take a few seconds. Owns nothing outside deploy/ and
# .cache/deploy-tools/ (and throwaway databases and a throwaway role on the
# running test clusters, dropped at the end); never starts a service.
# shellcheck disable=SC2317 # the check functions run through check()
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

DEPLOY=$REPO_ROOT/deploy
TOOLS=$REPO_ROOT/.cache/deploy-tools
FAILED=0
APT_UPDATED=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- tools -------------------------------------------------------------------

is_root() { [[ $(id -u) -eq 0 ]]; }

# Refreshes the apt lists once per run (when they are empty, or a package has
# no candidate).
apt_update_once() {
    ((APT_UPDATED)) && return 0
    is_root || die "apt lists are empty or stale: run as root, or apt-get update"
    note "apt-get update"
    apt-get update -qq >/dev/null
    APT_UPDATED=1
}

has_candidate() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
    [[ $policy == *"Candidate: "[!\(]* ]]
}

# Makes sure apt knows PKG, updating the lists once if needed.
apt_ready() {
    local pkg=$1
    has_candidate "$pkg" && return 0
    apt_update_once
    has_candidate "$pkg" || die "Debian package $pkg is not available from the configured apt sources"
}

apt_install() {
    local pkg=$1
    is_root || die "$pkg is needed: run as root, or apt-get install $pkg"
    apt_ready "$pkg"
    note "apt-get install $pkg"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
}

ensure_promtool() {
    if command -v promtool >/dev/null 2>&1; then
        PROMTOOL=$(command -v promtool)
        return 0
    fi
    PROMTOOL=$TOOLS/usr/bin/promtool
    [[ -x $PROMTOOL ]] && return 0
    command -v apt-get >/dev/null 2>&1 || die "promtool not found and no apt-get to fetch it"
    apt_ready prometheus
    note "fetching promtool from the Debian prometheus package"
    local dl=$WORK/deb
    mkdir -p "$dl"
    # apt's download sandbox user must be able to write here.
    chmod 755 "$WORK" "$dl"
    (cd "$dl" && apt-get download -qq prometheus >/dev/null 2>&1) ||
        die "apt-get download prometheus failed"
    dpkg-deb -x "$dl"/prometheus_*.deb "$dl/x"
    install -D -m 0755 "$dl/x/usr/bin/promtool" "$PROMTOOL"
}

ensure_systemd_analyze() {
    command -v systemd-analyze >/dev/null 2>&1 || apt_install systemd
    command -v systemd-analyze >/dev/null 2>&1 || die "systemd-analyze still missing after installing systemd"
}

# Picks a python3 with PyYAML and tomllib (3.11+).
ensure_python() {
    local cand
    for cand in python3 /usr/bin/python3; do
        if command -v "$cand" >/dev/null 2>&1 &&
            "$cand" -c 'import yaml, tomllib' >/dev/null 2>&1; then
            PY=$(command -v "$cand")
            return 0
        fi
    done
    apt_install python3-yaml
    PY=/usr/bin/python3
    "$PY" -c 'import yaml, tomllib' >/dev/null 2>&1 || die "$PY cannot import yaml and tomllib"
}

# --- reporting ---------------------------------------------------------------

# check NAME CMD...: runs CMD, prints "ok NAME" or "FAIL NAME" and CMD's
# output indented.
check() {
    local name=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    if ((rc == 0)); then
        printf 'ok    %s\n' "$name"
    else
        printf 'FAIL  %s\n' "$name"
        printf '%s\n' "$out" | sed 's/^/        /'
        FAILED=1
    fi
}

skip() {
    printf 'skip  %s (%s)\n' "$1" "$2"
}

# --- checks ------------------------------------------------------------------

RULES=$DEPLOY/prometheus/walrelay-alerts.yml
RULE_TESTS=$DEPLOY/prometheus/walrelay-alerts.test.yml
DASHBOARD=$DEPLOY/grafana/walrelay-dashboard.json
UNIT=$DEPLOY/systemd/walrelay.service
K8S=$DEPLOY/kubernetes

# Every alert carries a severity, a summary and a description, and the tests
# cover each one both firing and not firing.
alerts_complete() {
    "$PY" - "$RULES" "$RULE_TESTS" <<'PY'
import sys, yaml
rules, tests = (yaml.safe_load(open(p)) for p in sys.argv[1:3])
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
fired, quiet = set(), set()
for t in tests["tests"]:
    for c in t.get("alert_rule_test", []):
        (fired if c.get("exp_alerts") else quiet).add(c["alertname"])
bad = []
for a in alerts:
    n = a["alert"]
    if a.get("labels", {}).get("severity") not in ("warning", "critical"):
        bad.append(f"{n}: severity label must be warning or critical")
    for k in ("summary", "description"):
        if not a.get("annotations", {}).get(k, "").strip():
            bad.append(f"{n}: {k} annotation missing")
    if n not in fired:
        bad.append(f"{n}: no test where it fires")
    if n not in quiet:
        bad.append(f"{n}: no test where it stays quiet")
known = {a["alert"] for a in alerts}
bad += [f"test names unknown alert {n}" for n in sorted((fired | quiet) - known)]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# Every walrelay_* series the rules, tests and dashboard use is one
# src/metrics/ declares, with the suffix its type gets (_total for
# counters; _bucket, _sum, _count for histograms, whose family name prose
# may also use). A declaration (src/metrics/declare.rs) is
# `CONST field: Type {` then `name: "walrelay_...",`, its help and, for a
# histogram, its buckets, then a line with its closing brace.
metric_names_known() {
    "$PY" - "$REPO_ROOT/src" "$RULES" "$RULE_TESTS" "$DASHBOARD" <<'PY'
import glob, os, re, sys
files = [os.path.join(sys.argv[1], "metrics.rs")] + sorted(glob.glob(os.path.join(sys.argv[1], "metrics", "*.rs")))
src = "\n".join(open(p).read() for p in files)
decl = re.compile(r'^\s*[A-Z][A-Z0-9_]* \w+: ([^\n{]+?) \{\n\s*name: "(walrelay_\w+)",(.*?)\n\s*\}', re.M | re.S)
allowed = set()
for ty, name, body in decl.findall(src):
    kind = ("counter" if re.search(r"\bCounter\b", ty)
            else "histogram" if "Histogram" in ty or "buckets:" in body else "gauge")
    allowed |= {"counter": {name + "_total"},
                "histogram": {name + s for s in ("", "_bucket", "_sum", "_count")},
                "gauge": {name}}[kind]
if len(allowed) < 15:
    sys.exit(f"found only {len(allowed)} metric names in {sys.argv[1]}/metrics: has its layout changed?")
bad = []
for path in sys.argv[2:]:
    for name in sorted(set(re.findall(r"\bwalrelay_[a-z0-9_]+", open(path).read()))):
        if name not in allowed:
            bad.append(f"{path}: {name} is not a metric walrelay exports")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# Panels use the datasource variable, their ids are unique, their gridPos
# cells do not overlap, and their PromQL parses: the queries, with Grafana's
# variables substituted, become recording rules for `promtool check rules`.
# There is a multi-select `pipeline` variable with All, and every selector of
# a pipeline's series (all but walrelay_up and walrelay_build_info, which are
# the process's) chooses pipeline=~"$pipeline", with {{pipeline}} in the
# legend of a time series so that each pipeline is a series of its own.
dashboard_queries() {
    "$PY" - "$DASHBOARD" "$WORK/dashboard-rules.yml" <<'PY' || return 1
import json, re, sys, yaml
d = json.load(open(sys.argv[1]))
bad = []
if not 36 <= d.get("schemaVersion", 0) <= 41:
    bad.append(f"schemaVersion {d.get('schemaVersion')} is not around 39")
names = [v["name"] for v in d["templating"]["list"]]
if not any(v["type"] == "datasource" and v["query"] == "prometheus" for v in d["templating"]["list"]):
    bad.append("no prometheus datasource variable")
pvar = [v for v in d["templating"]["list"] if v["name"] == "pipeline"]
if not pvar or not (pvar[0].get("multi") and pvar[0].get("includeAll")):
    bad.append("no multi-select pipeline variable with All")
PROCESS_SERIES = {"walrelay_up", "walrelay_build_info"}
ids, rules = set(), []
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
cells = {}
for p in walk(d["panels"]):
    if p["id"] in ids:
        bad.append(f"duplicate panel id {p['id']}")
    ids.add(p["id"])
    g = p["gridPos"]
    if g["x"] + g["w"] > 24:
        bad.append(f"panel {p['title']!r} reaches past the 24 grid columns")
    for x in range(g["x"], g["x"] + g["w"]):
        for y in range(g["y"], g["y"] + g["h"]):
            if (x, y) in cells:
                bad.append(f"panel {p['title']!r} overlaps {cells[(x, y)]!r}")
                break
            cells[(x, y)] = p["title"]
        else:
            continue
        break
    if p["type"] == "row":
        continue
    if p.get("datasource", {}).get("uid") != "${datasource}":
        bad.append(f"panel {p['title']!r} does not use ${{datasource}}")
    for t in p.get("targets", []):
        expr = t["expr"]
        pipeline_series = False
        for name, labels in re.findall(r"\b(walrelay_[a-z0-9_]+)\{([^}]*)\}", expr):
            if name in PROCESS_SERIES:
                continue
            pipeline_series = True
            if 'pipeline=~"$pipeline"' not in labels:
                bad.append(f"panel {p['title']!r}: {name} does not select pipeline=~\"$pipeline\"")
        if pipeline_series and p["type"] in ("timeseries", "state-timeline") and "{{pipeline}}" not in t.get("legendFormat", ""):
            bad.append(f"panel {p['title']!r}: legend {t.get('legendFormat')!r} does not show {{{{pipeline}}}}")
        for var, val in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$job", ".*"), ("$instance", ".*"), ("$pipeline", ".*")):
            expr = expr.replace(var, val)
        if "$" in expr:
            bad.append(f"panel {p['title']!r}: unknown variable in {t['expr']}")
        rules.append({"record": f"dashboard:panel{p['id']}:{t['refId']}", "expr": expr})
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
    "$PROMTOOL" check rules "$WORK/dashboard-rules.yml"
}

# systemd-analyze verify needs ExecStart's binary to exist: verify a copy of
# the unit whose ExecStart points at a stub, changing nothing else. verify
# exits 0 on some bad values (it logs and ignores them), so any output fails.
unit_verify() {
    local dir=$WORK/systemd out
    mkdir -p "$dir"
    printf '#!/bin/sh\nexit 0\n' >"$dir/walrelay"
    chmod 0755 "$dir/walrelay"
    grep -q '^ExecStart=/usr/local/bin/walrelay run --config /etc/walrelay/walrelay.toml$' "$UNIT" || {
        echo "ExecStart is not /usr/local/bin/walrelay run --config /etc/walrelay/walrelay.toml"
        return 1
    }
    sed "s|^ExecStart=/usr/local/bin/walrelay |ExecStart=$dir/walrelay |" "$UNIT" >"$dir/walrelay.service"
    out=$(systemd-analyze verify "$dir/walrelay.service" 2>&1) || {
        printf '%s\n' "$out"
        return 1
    }
    [[ -z $out ]] || {
        printf '%s\n' "$out"
        return 1
    }
}

# TimeoutStopSec must leave room for walrelay's graceful shutdown.
unit_timeouts() {
    local stop
    stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}$/\1/p' "$UNIT")
    [[ -n $stop ]] || {
        echo "TimeoutStopSec= missing or not in seconds"
        return 1
    }
    ((stop * 1000 > 10000)) || {
        echo "TimeoutStopSec=${stop}s is not above the default runtime.shutdown_timeout_ms (10000)"
        return 1
    }
}

k8s_manifests() {
    "$PY" - "$K8S" <<'PY'
import glob, os, sys, tomllib, yaml
bad = []
docs = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    for doc in yaml.safe_load_all(open(path)):
        if doc is None:
            continue
        for key in ("apiVersion", "kind"):
            if key not in doc:
                bad.append(f"{path}: {key} missing")
        if doc.get("kind") != "Kustomization" and not doc.get("metadata", {}).get("name"):
            bad.append(f"{path}: metadata.name missing")
        docs.setdefault(doc.get("kind"), []).append((path, doc))
def one(kind):
    found = docs.get(kind, [])
    if len(found) != 1:
        bad.append(f"expected one {kind}, found {len(found)}")
        return {}
    return found[0][1]
dep, cm, pdb, svc, sec, kus = (one(k) for k in ("Deployment", "ConfigMap", "PodDisruptionBudget", "Service", "Secret", "Kustomization"))
if not bad:
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    tlabels = spec["template"]["metadata"]["labels"]
    def selects(sel, what):
        if not sel or any(tlabels.get(k) != v for k, v in sel.items()):
            bad.append(f"{what} selector {sel} does not match the pod labels {tlabels}")
    selects(spec["selector"]["matchLabels"], "Deployment")
    selects(pdb["spec"]["selector"]["matchLabels"], "PodDisruptionBudget")
    selects(svc["spec"]["selector"], "Service")
    if spec.get("replicas") != 2:
        bad.append("Deployment must run 2 replicas (active + hot standby)")
    [c] = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    if ports.get("metrics") != 9187:
        bad.append("container port metrics must be 9187")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("metrics", 9187):
            bad.append(f"{probe} must GET {path} on the metrics port")
    if not c.get("resources", {}).get("limits", {}).get("memory") or not c["resources"].get("requests"):
        bad.append("container needs resource requests and a memory limit")
    if svc["spec"]["ports"][0].get("targetPort") not in ("metrics", 9187):
        bad.append("Service must target the metrics port")
    ann = svc["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/port") != "9187":
        bad.append("Service needs prometheus.io/scrape and prometheus.io/port annotations")
    cfg = tomllib.loads(cm["data"]["walrelay.toml"])
    if cfg.get("metrics", {}).get("listen") != "0.0.0.0:9187":
        bad.append('ConfigMap walrelay.toml must set [metrics] listen = "0.0.0.0:9187"')
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    secret_vol = next((n for n, v in vols.items() if v.get("secret", {}).get("secretName") == sec["metadata"]["name"]), None)
    pw = cfg.get("postgres", {}).get("password_file", "")
    if not secret_vol or not pw.startswith(mounts.get(secret_vol, "?") + "/"):
        bad.append(f"postgres.password_file {pw!r} is not in the mounted Secret {sec['metadata']['name']}")
    args = c.get("args", [])
    conf = args[args.index("--config") + 1] if "--config" in args else ""
    if conf not in mounts.values():
        bad.append(f"--config {conf!r} is not a mounted path")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    shutdown = cfg.get("runtime", {}).get("shutdown_timeout_ms", 10000)
    if grace * 1000 <= shutdown:
        bad.append(f"terminationGracePeriodSeconds {grace} must exceed runtime.shutdown_timeout_ms {shutdown}")
    for r in kus.get("resources", []):
        if not os.path.exists(os.path.join(sys.argv[1], r)):
            bad.append(f"kustomization lists missing {r}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# The ConfigMap's walrelay.toml passes `walrelay validate`, with the
# password_file pointed at a temporary file.
k8s_config_validates() {
    "$PY" - "$K8S/configmap.yaml" "$WORK/password" >"$WORK/walrelay.toml" <<'PY'
import sys, yaml
toml = yaml.safe_load(open(sys.argv[1]))["data"]["walrelay.toml"]
print(toml.replace("/etc/walrelay/secret/password", sys.argv[2]))
PY
    echo secret >"$WORK/password"
    "$WALRELAY_BIN" validate --config "$WORK/walrelay.toml"
}

# Every native example in config/ (walrelay.toml, walrelay-poll.toml, ...)
# passes `walrelay validate`, with its password variable set to a
# placeholder. No test of `cargo test` enumerates config/*.toml.
config_examples_validate() {
    local f bad=0
    for f in "$REPO_ROOT"/config/*.toml; do
        WALRELAY_PG_PASSWORD=placeholder "$WALRELAY_BIN" validate --config "$f" || bad=1
    done
    return "$bad"
}

# Every setting in walrelay.conf is a parameter this PostgreSQL knows.
pg_settings_known() {
    local names unknown
    names=$("$PG_POSTGRES" --describe-config | cut -f1)
    unknown=$(sed -n 's/^\([a-z_]*\) *=.*/\1/p' "$DEPLOY/postgresql/walrelay.conf" | grep -vxF "$names" || true)
    [[ -z $unknown ]] || {
        echo "unknown settings: $unknown"
        return 1
    }
}

# deploy/postgresql/outbox_emit.sql installs twice (CREATE OR REPLACE) into a
# throwaway database of the running cluster $PG_DIR and does what it says:
# a committed call emits one transactional message, prefix outbox, whose
# content is the event as a JSON object (a fresh uuid id, the members given)
# at the LSN it returned; a rolled-back call emits nothing; another prefix is
# taken; a NULL aggregatetype or prefix is refused. Read back through a
# temporary test_decoding slot (gone with the session), then the database is
# dropped.
outbox_emit_works() {
    local db=check_deploy_outbox_emit_$$ rc=0 out
    pg_sql -qc "CREATE DATABASE $db" || return 1
    out=$(
        pg_sql -d "$db" -qf "$DEPLOY/postgresql/outbox_emit.sql" &&
            pg_sql -d "$db" -qf "$DEPLOY/postgresql/outbox_emit.sql" &&
            pg_sql -d "$db" -At -v slot="$db" <<'SQL'
SELECT 'slot', lsn FROM pg_create_logical_replication_slot(:'slot', 'test_decoding', true);
BEGIN;
SELECT 'emitted', outbox_emit('Order', '42', 'OrderPlaced', '{"total": 10, "items": [1, 2]}');
COMMIT;
BEGIN;
SELECT 'rolled back', outbox_emit('Order', '43', 'OrderPlaced', '{}');
ROLLBACK;
SELECT 'billing', outbox_emit('Invoice', NULL, NULL, NULL, 'billing');
SELECT 'change', lsn, data FROM pg_logical_slot_peek_changes(:'slot', NULL, NULL)
    WHERE data LIKE 'message:%';
DO $$ BEGIN
    BEGIN PERFORM outbox_emit(NULL, '1', 't', '{}'); EXCEPTION WHEN raise_exception THEN RETURN; END;
    RAISE EXCEPTION 'a NULL aggregatetype was accepted';
END $$;
DO $$ BEGIN
    BEGIN PERFORM outbox_emit('A', '1', 't', '{}', NULL); EXCEPTION WHEN raise_exception THEN RETURN; END;
    RAISE EXCEPTION 'a NULL prefix was accepted';
END $$;
SQL
    ) || rc=1
    pg_sql -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" || rc=1
    ((rc == 0)) || {
        printf '%s\n' "$out"
        return 1
    }
    "$PY" - "$out" <<'PY'
import json, re, sys, uuid
rows = [l.split("|", 2) for l in sys.argv[1].splitlines()]
lsns = {r[0]: r[1] for r in rows if len(r) == 2}
changes = [(r[1], r[2]) for r in rows if len(r) == 3 and r[0] == "change"]
bad = []
if len(changes) != 2:
    bad.append(f"expected 2 messages (committed outbox, billing), got {len(changes)}: {changes}")
def check(i, lsn_key, prefix, want):
    if i >= len(changes):
        return
    lsn, data = changes[i]
    m = re.match(r"message: transactional: 1 prefix: (\S+), sz: (\d+) content:(.*)$", data, re.S)
    if not m:
        bad.append(f"not a transactional message: {data}")
        return
    if m.group(1) != prefix:
        bad.append(f"prefix {m.group(1)}, expected {prefix}")
    if lsn != lsns.get(lsn_key):
        bad.append(f"message at {lsn}, outbox_emit returned {lsns.get(lsn_key)}")
    doc = json.loads(m.group(3))
    uuid.UUID(doc.pop("id"))
    if doc != want:
        bad.append(f"content {doc}, expected {want} and an id")
check(0, "emitted", "outbox", {"aggregatetype": "Order", "aggregateid": "42", "type": "OrderPlaced",
                               "payload": {"total": 10, "items": [1, 2]}})
check(1, "billing", "billing", {"aggregatetype": "Invoice", "aggregateid": None, "type": None, "payload": None})
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# deploy/postgresql/outbox_poll.sql (with a throwaway role for -v role) and
# outbox_notify.sql install twice into a throwaway database of the running
# cluster $POLL_PG_DIR and do what they say: the table has the columns
# config/walrelay-poll.toml names (seq an identity column that refuses
# explicit values, published_at a nullable timestamptz), the partial index's
# predicate is the claim's WHERE and the claim uses it; as the role, the
# statements walrelay runs (shard lock, claim FOR UPDATE SKIP LOCKED in seq
# order, mark, backlog statistics) pass with the grants, DELETE is refused
# until the file's commented GRANT DELETE runs, then retention deletes the
# marked rows; the trigger is AFTER INSERT FOR EACH STATEMENT on the given
# channel, and an insert's commit notifies the role's LISTEN. Then the
# database and the role are dropped.
outbox_poll_works() {
    local db=check_deploy_outbox_poll_$$ role=check_deploy_poll_$$ rc=0 out grant_delete
    local poll=$DEPLOY/postgresql/outbox_poll.sql notify=$DEPLOY/postgresql/outbox_notify.sql
    grant_delete=$(sed -n 's/^-- \(GRANT DELETE ON TABLE .*;\)$/\1/p' "$poll")
    [[ -n $grant_delete ]] || {
        echo "outbox_poll.sql has no commented GRANT DELETE line"
        return 1
    }
    poll_sql -qc "CREATE DATABASE $db" || return 1
    out=$(
        # Installed twice: the second run must be a no-op (its "already
        # exists, skipping" notices silenced).
        export PGOPTIONS="-c client_min_messages=warning"
        poll_sql -d "$db" -v role="$role" -f "$poll" &&
            poll_sql -d "$db" -v role="$role" -f "$poll" &&
            poll_sql -d "$db" -v table=public.outbox -v channel="$db" -f "$notify" &&
            poll_sql -d "$db" -v table=public.outbox -v channel="$db" -f "$notify" &&
            unset PGOPTIONS &&
            {
                cat <<'SQL'
SELECT 'column', attname, format_type(atttypid, atttypmod), attnotnull, attidentity
    FROM pg_attribute WHERE attrelid = 'public.outbox'::regclass AND attnum > 0 AND NOT attisdropped;
SELECT 'index', c.relname, pg_get_indexdef(i.indexrelid), pg_get_expr(i.indpred, i.indrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'public.outbox'::regclass AND i.indpred IS NOT NULL;
SELECT 'trigger', tgname, pg_get_triggerdef(oid)
    FROM pg_trigger WHERE tgrelid = 'public.outbox'::regclass AND NOT tgisinternal;
SET ROLE :"role";
LISTEN :"channel";
RESET ROLE;
INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload)
    VALUES ('Order', '1', 'first', '{}'), ('Order', '2', 'second', '{}'), ('Order', '1', 'third', '{}');
DO $$ BEGIN
    INSERT INTO public.outbox (seq, aggregatetype, aggregateid, type) VALUES (1, 'x', 'x', 'x');
    RAISE EXCEPTION 'an explicit seq was accepted';
EXCEPTION WHEN generated_always THEN NULL;
END $$;
SET ROLE :"role";
SELECT 'lock', pg_try_advisory_lock(hashtext('walrelay.poll:public.outbox'), 0);
BEGIN;
SELECT 'claim', seq, type FROM "public"."outbox" WHERE "published_at" IS NULL
    ORDER BY "seq" LIMIT 2 FOR UPDATE SKIP LOCKED;
UPDATE "public"."outbox" SET "published_at" = clock_timestamp()
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM "public"."outbox" WHERE "published_at" IS NULL ORDER BY "seq" LIMIT 2));
COMMIT;
SELECT 'stats', (SELECT count(*) FROM "public"."outbox" WHERE "published_at" IS NULL),
    (SELECT ctid::text || '/' || xmin::text FROM "public"."outbox" WHERE "published_at" IS NULL ORDER BY "seq" LIMIT 1) IS NOT NULL,
    (SELECT extract(epoch FROM clock_timestamp() - min("created_at")) >= 0 FROM "public"."outbox" WHERE "published_at" IS NULL);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT ctid::text FROM "public"."outbox" WHERE "published_at" IS NULL
    ORDER BY "seq" LIMIT 1000 FOR UPDATE SKIP LOCKED;
RESET enable_seqscan;
DO $$ BEGIN
    BEGIN DELETE FROM public.outbox WHERE false; EXCEPTION WHEN insufficient_privilege THEN RETURN; END;
    RAISE EXCEPTION 'the role may DELETE without GRANT DELETE';
END $$;
RESET ROLE;
SQL
                printf '%s\n' "$grant_delete"
                cat <<'SQL'
SET ROLE :"role";
WITH deleted AS (
    DELETE FROM "public"."outbox" WHERE ctid = ANY(ARRAY(SELECT ctid FROM "public"."outbox"
        WHERE "published_at" < clock_timestamp() - make_interval(secs => 0) LIMIT 5000 FOR UPDATE SKIP LOCKED))
    RETURNING 1)
SELECT 'retention', count(*) FROM deleted;
SQL
            } | poll_sql -d "$db" -At -v role="$role" -v channel="$db" 2>&1
    ) || rc=1
    poll_sql -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" || rc=1
    poll_sql -qc "DROP ROLE IF EXISTS $role" || rc=1
    ((rc == 0)) || {
        printf '%s\n' "$out"
        return 1
    }
    "$PY" - "$out" "$db" <<'PY'
import sys
out, channel = sys.argv[1], sys.argv[2]
rows = {}
for line in out.splitlines():
    if "|" in line:
        kind, *rest = line.split("|")
        rows.setdefault(kind, []).append(rest)
bad = []
cols = {c[0]: c[1:] for c in rows.get("column", [])}
want = {"id": ("uuid", "t", ""), "seq": ("bigint", "t", "a"), "aggregatetype": ("character varying(255)", "t", ""),
        "aggregateid": ("character varying(255)", "t", ""), "type": ("character varying(255)", "t", ""),
        "payload": ("jsonb", "f", ""), "published_at": ("timestamp with time zone", "f", ""),
        "created_at": ("timestamp with time zone", "t", "")}
for name, spec in want.items():
    if tuple(cols.get(name, ())) != spec:
        bad.append(f"column {name}: {cols.get(name)}, expected (type, not null, identity) {spec}")
idx = rows.get("index", [])
if len(idx) != 1 or idx[0][2] != "(published_at IS NULL)" or not idx[0][1].endswith("btree (seq) WHERE (published_at IS NULL)"):
    bad.append(f"expected one partial index on (seq) WHERE published_at IS NULL, got {idx}")
trig = rows.get("trigger", [])
if len(trig) != 1 or trig[0][0] != "walrelay_outbox_notify" or not all(
        s in trig[0][1] for s in ("AFTER INSERT ON public.outbox FOR EACH STATEMENT", f"walrelay_outbox_notify('{channel}')")):
    bad.append(f"expected the trigger walrelay_outbox_notify AFTER INSERT FOR EACH STATEMENT on {channel}, got {trig}")
if f'Asynchronous notification "{channel}" received' not in out:
    bad.append(f"no notification on {channel} after an insert committed")
if rows.get("lock") != [["t"]]:
    bad.append(f"the role could not take the shard lock: {rows.get('lock')}")
if rows.get("claim") != [["1", "first"], ["2", "second"]]:
    bad.append(f"claimed {rows.get('claim')}, expected seq 1 and 2 in order")
if rows.get("stats") != [["1", "t", "t"]]:
    bad.append(f"backlog statistics {rows.get('stats')}, expected 1 unpublished row with an identity and an age")
plan = [l for l in out.splitlines() if "Index Scan" in l or "Seq Scan" in l]
if not idx or not any(f"using {idx[0][0]} on outbox" in l for l in plan):
    bad.append(f"the claim does not use the partial index: {plan}")
if rows.get("retention") != [["2"]]:
    bad.append(f"retention deleted {rows.get('retention')}, expected the 2 marked rows")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# The Containerfile builds on nothing from a registry and copies exactly the
# files scripts/image.sh puts in its context; the Kubernetes Deployment runs
# the image's user and names the image that file builds.
containerfile_inputs() {
    local file=$DEPLOY/Containerfile bad=0 froms copied
    froms=$(sed -n 's/^FROM \(.*\)/\1/p' "$file")
    [[ $froms == scratch ]] || {
        echo "FROM lines: $froms; expected only FROM scratch (no base image to pull)"
        bad=1
    }
    copied=$(sed -n 's/^COPY \(.*\) [^ ]*$/\1/p' "$file" | tr ' ' '\n' | sort | tr '\n' ' ')
    [[ $copied == "ca-certificates.crt group passwd walrelay " ]] || {
        echo "COPY sources: $copied; expected those of scripts/image.sh context (ca-certificates.crt group passwd walrelay)"
        bad=1
    }
    grep -q '^USER 10001:10001$' "$file" || {
        echo "USER is not 10001:10001 (the Deployment's runAsUser)"
        bad=1
    }
    if ! grep -q 'image: .*/walrelay:' "$K8S/deployment.yaml" ||
        ! grep -q 'deploy/Containerfile' "$K8S/deployment.yaml"; then
        echo "deploy/kubernetes/deployment.yaml does not name the image deploy/Containerfile builds"
        bad=1
    fi
    return "$bad"
}

cd "$REPO_ROOT"
ensure_promtool
ensure_systemd_analyze
ensure_python

check "promtool check rules" "$PROMTOOL" check rules "$RULES"
check "promtool test rules" "$PROMTOOL" test rules "$RULE_TESTS"
check "alerts: severity, summary, description, tested firing and quiet" alerts_complete
check "metric names are declared in src/metrics/" metric_names_known
check "dashboard is valid JSON" "$PY" -m json.tool "$DASHBOARD"
check "dashboard: datasource and pipeline variables, panel ids, every query by pipeline, PromQL parses" dashboard_queries
check "systemd-analyze verify walrelay.service" unit_verify
check "systemd unit: TimeoutStopSec above shutdown_timeout" unit_timeouts
check "systemd unit: exposure level at most 2.0" systemd-analyze security --offline=yes --threshold=20 "$UNIT"
check "kubernetes manifests parse as YAML" "$PY" -c '
import sys, yaml
for p in sys.argv[1:]:
    list(yaml.safe_load_all(open(p)))' "$K8S"/*.yaml
check "kubernetes manifests: structure and cross-references" k8s_manifests

WALRELAY_BIN=${WALRELAY_BIN:-}
if [[ -z $WALRELAY_BIN ]]; then
    for cand in target/debug/walrelay target/release/walrelay; do
        if [[ -x $cand ]]; then
            WALRELAY_BIN=$REPO_ROOT/$cand
            break
        fi
    done
fi
if [[ -n $WALRELAY_BIN ]]; then
    check "kubernetes ConfigMap passes walrelay validate" k8s_config_validates
    check "config/*.toml examples pass walrelay validate" config_examples_validate
else
    skip "kubernetes ConfigMap passes walrelay validate" "no walrelay binary built; set WALRELAY_BIN"
    skip "config/*.toml examples pass walrelay validate" "no walrelay binary built; set WALRELAY_BIN"
fi

PG_POSTGRES=$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -n 1 || true)
if [[ -n $PG_POSTGRES ]]; then
    check "postgresql/walrelay.conf settings exist" pg_settings_known
else
    skip "postgresql/walrelay.conf settings exist" "no PostgreSQL server installed"
fi
check "Containerfile from scratch, its inputs those of scripts/image.sh, its user the Deployment's" containerfile_inputs

# The SQL snippets need a server: the test environment's clusters when they
# run (scripts/env.sh up); this script never starts one. outbox_emit.sql
# needs logical decoding; the polling snippets run on the wal_level=replica
# cluster beside it (where the polling source is tested), else on the
# logical one.
PG_DIR=${WALRELAY_TEST_PG_DIR:-$REPO_ROOT/.walrelay-env/pg}
pg_sql() { "$SCRIPT_DIR/pg.sh" psql "$PG_DIR" -v ON_ERROR_STOP=1 "$@"; }
pg_running() { "$SCRIPT_DIR/pg.sh" status "$1" >/dev/null 2>&1; }
if pg_running "$PG_DIR"; then
    check "postgresql/outbox_emit.sql installs and emits what it documents" outbox_emit_works
else
    skip "postgresql/outbox_emit.sql installs and emits what it documents" "no PostgreSQL running in $PG_DIR; scripts/env.sh up"
fi
POLL_PG_DIR=$PG_DIR-replica
pg_running "$POLL_PG_DIR" || POLL_PG_DIR=$PG_DIR
poll_sql() { "$SCRIPT_DIR/pg.sh" psql "$POLL_PG_DIR" -v ON_ERROR_STOP=1 "$@"; }
if pg_running "$POLL_PG_DIR"; then
    check "postgresql/outbox_poll.sql and outbox_notify.sql install and work as walrelay's polling source uses them" outbox_poll_works
else
    skip "postgresql/outbox_poll.sql and outbox_notify.sql install and work as walrelay's polling source uses them" "no PostgreSQL running in $PG_DIR(-replica); scripts/env.sh up"
fi

exit "$FAILED"
