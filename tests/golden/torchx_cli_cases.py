"""The TorchX cases that muster reproduces through its command line (tests/golden/torchx-NN_*
folders whose name has neither _k8s_ nor _slurm_: the dist.ddp component, the local
scheduler, the CLI's parsing and status formats), driven by their case.json.

Run by tests/cli/t0090-torchx-goldens.sh: python3 torchx_cli_cases.py WORKDIR, with MUSTER set.
Each item of a case (a subcase of "subcases", else each top-level key that is not a
description) has one check below, registered with @check(CASE, ITEM); the check reads its
inputs from the item and compares with the item's expectations. The driver prints TAP and
fails on a case folder it does not know, an item with no check, a check with no item, and an
expected key a check did not read (item.expect) or mark as a divergence (item.diverges; the
case's DIVERGENCES.md says why).
"""
import json
import os
import re
import shlex
import subprocess
import sys

GOLDEN = os.path.dirname(os.path.abspath(__file__))
MUSTER = os.environ["MUSTER"]
WORK = sys.argv[1]
DESCRIPTIONS = {"id", "provenance", "torchx_commit", "source", "notes", "note"}

passes = fails = 0


def tap(ok, name, why=""):
    global passes, fails
    if ok:
        passes += 1
        print("ok - " + name)
    else:
        fails += 1
        print("not ok - %s%s" % (name, ": " + why if why else ""))
    sys.stdout.flush()


class Item:
    """One item of a case: its node, and the expected keys its check has read."""

    def __init__(self, case, name, node):
        self.case, self.name, self.node, self.read, self.failed = case, name, node, set(), 0

    def eq(self, what, got, want):
        ok = got == want
        self.failed += not ok
        tap(ok, "%s: %s: %s" % (self.case, self.name, what),
            "" if ok else "got %r, want %r" % (got, want))

    def true(self, what, cond, why=""):
        self.eq(what, bool(cond), True) if cond else self.eq(what, why or False, True)

    def expect(self, key):
        """node.expected.KEY (or node.KEY for an item without an "expected" object)."""
        self.read.add(key)
        exp = self.node.get("expected") if isinstance(self.node, dict) else None
        return (exp if isinstance(exp, dict) else self.node)[key]

    def diverges(self, key, why):
        self.read.add(key)
        print("# %s: %s: \"%s\": muster diverges: %s" % (self.case, self.name, key, why))


CHECKS = {}


def check(case, *items):
    def reg(fn):
        for i in items:
            CHECKS[(case, i)] = fn
        return fn
    return reg


def run(args, env=None, cwd=None, input=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([MUSTER] + args, capture_output=True, text=True, env=e, cwd=cwd or WORK,
                       input=input, timeout=120)
    return p.returncode, p.stdout, p.stderr


def dry_json(args, env=None):
    rc, out, err = run(["run", "--dryrun", "--json"] + args, env)
    if rc != 0:
        raise AssertionError("muster run --dryrun --json %s: exit %d: %s" % (
            " ".join(args), rc, err.strip()))
    return json.loads(out)


def role0(d):
    return d["app"]["roles"][0]


def after(args, flag):
    return args[args.index(flag) + 1]


# TorchX's env names -> muster's (case 11 D4, case 14 D3).
ENV_NAMES = {"TORCHX_TRACKING_EXPERIMENT_NAME": "MUSTER_TRACKING_EXPERIMENT_NAME",
             "TORCHX_TRACKING_RUN_NAME": "MUSTER_TRACKING_RUN_NAME",
             "TORCHX_RANK0_HOST": "MUSTER_RANK0_HOST", "TORCHX_JOB_ID": "MUSTER_JOB_ID"}

# ================================================================ case 11: the dist.ddp component

C11 = "torchx-11_dist_ddp_component"
DDP = ["dist.ddp", "--launcher", "torchrun"]


@check(C11, "parse_nnodes")
def c11_parse_nnodes(it):
    """-j N | NxM | MIN:MAXxM -> (min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)."""
    it.true("returns (min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)",
            it.node["returns"] == "(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)")
    for j, want in it.node.items():
        if j in ("returns", "errors (ValueError)"):
            continue
        r = role0(dry_json(DDP + ["-j", j, "--script", "t.py"]))
        got = [r["min_replicas"], r["num_replicas"], int(after(r["args"], "--nproc_per_node")),
               after(r["args"], "--nnodes")]
        it.eq("-j %s" % j, got, want)
    for bad in it.node["errors (ValueError)"]:
        rc, _, err = run(["run", "--dryrun"] + DDP + ["-j", bad, "--script", "t.py"])
        it.eq("-j %s is a usage error (exit 2)" % bad, rc, 2)


@check(C11, "name_parsing")
def c11_name_parsing(it):
    for n in it.node:
        what = ["--script", n["script"]] if "script" in n else ["-m", n["m"]]
        d = dry_json(DDP + ["--name", n["name"]] + what)
        env = role0(d)["env"]
        got = (env["MUSTER_TRACKING_EXPERIMENT_NAME"], env["MUSTER_TRACKING_RUN_NAME"],
               d["app"]["name"])
        it.eq("--name %s %s" % (n["name"], " ".join(what)), got,
              (n["experiment"], n["run"], n.get("appdef.name", n["run"])))


@check(C11, "debug_env")
def c11_debug_env(it):
    env = role0(dry_json(DDP + ["--script", "foo.py", "--debug", "True"]))["env"]
    for k, v in it.node.items():
        it.eq("--debug True sets %s" % k, env.get(k), v)
    env = role0(dry_json(DDP + ["--script", "foo.py"]))["env"]
    it.eq("without --debug none is set", [k for k in it.node if k in env], [])


@check(C11, "static_backend_assertions")
def c11_static(it):
    """--rdzv_backend static passes through; --rdzv_conf and --rdzv_port are not parameters
    and static gets no --node_rank (D3)."""
    args = role0(dry_json(DDP + ["-j", "2x2", "--script", "foo.py", "--rdzv_backend",
                                 "static"]))["args"]
    cmd = " ".join(args)
    for a in it.node:
        m = re.match(r"cmd contains '(.*)'$", a)
        it.true("assertion is of the form: cmd contains '...'", m, a)
        want = m.group(1)
        if want.startswith("--rdzv_conf") or want.startswith("--node_rank"):
            rc, _, _ = run(["run", "--dryrun"] + DDP + ["-j", "2x2", "--script", "foo.py",
                                                        "--rdzv_backend", "static",
                                                        want.split(" ")[0], "x"])
            it.eq("%s is not a parameter (D3): exit 2" % want.split(" ")[0], rc, 2)
            it.eq("and not in the command (D3)", want.split(" ")[0] in cmd, False)
        else:
            it.true("cmd contains '%s'" % want, want in cmd, cmd)


@check(C11, "mounts_assertion")
def c11_mounts(it):
    m = re.match(r"ddp\(script='([^']*)', mounts=\[(.*)\]\) -> (\d+) mount$", it.node)
    it.true("assertion parses", m, it.node)
    items = [x.strip().strip("'") for x in m.group(2).split(",")]
    r = role0(dry_json(DDP + ["--script", m.group(1), "--mounts", ",".join(items)]))
    it.eq("mounts", len(r["mounts"]), int(m.group(3)))
    it.eq("the mount", (r["mounts"][0]["type"], r["mounts"][0]["src_path"],
                        r["mounts"][0]["dst_path"], r["mounts"][0]["read_only"]),
          ("bind", "/dst", "/dst", True))


@check(C11, "errors")
def c11_errors(it):
    for e in it.node:
        msg = re.search(r"ValueError\('(.*)'\)", e).group(1)
        it.true("the error names both ways", e.startswith("neither or both of --script/-m"))
        for args in ([], ["--script", "a.py", "-m", "a"]):
            rc, _, err = run(["run", "--dryrun"] + DDP + args)
            it.eq("%s: exit 2" % (" ".join(args) or "neither"), rc, 2)
            it.true("%s: TorchX's message" % (" ".join(args) or "neither"), msg in err, err)


@check(C11, "derived_expected_appdefs")
def c11_appdefs(it):
    """Each invocation's AppDef, but for the chosen divergences: muster runs torchrun as argv
    (D1), its endpoint is musterd's (D2; no port_map, --rdzv_port/--rdzv_conf/--tee are not
    parameters, D3), env names (D4), no default image (D5), --role is the role name (D6)."""
    for a in it.node:
        args, want = a["cli_args"], a["expected_appdef"]
        ours = [x for i, x in enumerate(args)
                if x not in ("--rdzv_conf", "--rdzv_port", "--tee") and
                (i == 0 or args[i - 1] not in ("--rdzv_conf", "--rdzv_port", "--tee"))]
        d = dry_json(DDP + ours)
        r, w = role0(d), want["roles"][0]
        tag = " ".join(args)
        it.eq(tag + ": names", (d["app"]["name"], r["name"]), (want["name"], w["name"]))
        for k in ("min_replicas", "num_replicas", "max_retries", "retry_policy", "mounts"):
            it.eq(tag + ": " + k, r[k], w[k])
        it.eq(tag + ": resource", r["resource"], w["resource"])
        it.eq(tag + ": env", r["env"],
              dict({ENV_NAMES.get(k, k): v for k, v in w["env"].items()},
                   MUSTER_JOB_ID="local://muster/${app_id}",
                   # D8: no torch >= 2.4 shared store (docs/c10d.md)
                   TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"))
        theirs = shlex.split(w["args"][1])
        it.eq(tag + ": torchrun as argv (D1)", (w["entrypoint"], w["args"][0], theirs[0],
                                                r["entrypoint"]),
              ("bash", "-c", "torchrun", "torchrun"))
        for flag in ("--nnodes", "--nproc_per_node", "--rdzv_backend"):
            it.eq(tag + ": " + flag, after(r["args"], flag), after(theirs, flag))
        it.eq(tag + ": rendezvous on the job's musterd (D2)", after(r["args"], "--rdzv_endpoint"),
              "${c10d_endpoint}" if after(theirs, "--rdzv_backend") == "c10d"
              else "${rdzv_endpoint}")
        script = theirs[theirs.index("--role") + 2:]
        if "--node_rank" in script:  # static: TorchX passes the replica id (D3)
            script = script[2:]
        it.eq(tag + ": the script and its arguments", r["args"][-len(script):], script)
        it.eq(tag + ": --role is the role name (D6)", after(r["args"], "--role"), w["name"])


# ========================================================== case 14: the local scheduler

C14 = "torchx-14_local_cwd_and_local_docker"


def local_env(extra=None):
    e = {"HOME": WORK, "MUSTERCONFIG": "", "MUSTER_LOG_DIR": os.path.join(WORK, "logs")}
    e.update(extra or {})
    return e


def write_app(app, path, bindir):
    """A component file for the case's app; each role's entrypoint is a script in BINDIR
    (on PATH, as local_cwd resolves entrypoints) that prints its arguments and environment."""
    roles = []
    for r in app["roles"]:
        exe = os.path.join(bindir, r["entrypoint"])
        with open(exe, "w") as f:
            f.write("#!/bin/sh\necho \"args=$*\"\nenv | sort\n")
        os.chmod(exe, 0o755)
        roles.append({"name": r["name"], "entrypoint": r["entrypoint"],
                      "args": r.get("args", []), "env": r.get("env", {}),
                      "num_replicas": str(r.get("num_replicas", 1))})
    with open(path, "w") as f:
        json.dump({"name": app["name"], "description": "TorchX case 14",
                   "app": {"name": app["name"], "roles": roles}}, f)


@check(C14, "a_local_dryrun_env_and_layout")
def c14_layout(it):
    app = it.node["input"]["app"]
    bindir = os.path.join(WORK, "bin14")
    os.makedirs(bindir, exist_ok=True)
    comp = os.path.join(WORK, "app14.yaml")
    write_app(app, comp, bindir)
    env = local_env({"PATH": bindir + ":" + os.environ["PATH"], "MUSTER_APP_ID_SUFFIX": "42"})
    logs = os.path.join(WORK, "logs")
    rc, out, err = run(["run", "--dryrun", "./app14.yaml"], env)
    it.eq("dryrun exits 0", rc, 0)
    it.eq("dryrun creates no directories", os.path.exists(logs),
          not it.expect("dryrun creates no directories"))
    it.true("replica args = [entrypoint, *args]",
            re.search(r"%s/0: %s %s" % (app["roles"][0]["name"], app["roles"][0]["entrypoint"],
                                        " ".join(app["roles"][0]["args"])), out), out)
    it.true("replica args", it.expect("replica args").startswith("[role.entrypoint, *role.args]"))
    rc, out, err = run(["run", "./app14.yaml"], env)
    handle = out.strip()
    app_id = handle.split("/")[-1]
    it.eq("the job ran", (rc, handle), (0, "local://muster/" + app_id))
    app_dir = os.path.join(logs, app_id)
    # "<LOG_DIR>/<session_name=torchx>/<app_id>": no session level (D2)
    it.true("app_log_dir", it.expect("app_log_dir").endswith("/<session_name=torchx>/<app_id>"))
    it.true("replica_log_dir", it.expect("replica_log_dir") == "<app_log_dir>/<role_name>/<replica_id>")
    files = [f.replace("<replica_log_dir>/", "") for f in it.expect("files")]
    for r in app["roles"]:
        for k in range(r.get("num_replicas", 1)):
            rdir = os.path.join(app_dir, r["name"], str(k))
            for f in files:
                it.true("%s/%d/%s" % (r["name"], k, f), os.path.isfile(os.path.join(rdir, f)))
            text = open(os.path.join(rdir, "stdout.log")).read()
            it.true("%s/%d ran with its args" % (r["name"], k),
                    ("args=" + " ".join(r.get("args", []))) in text, text)
            for name, val in r.get("env", {}).items():
                it.true("%s/%d has the role env %s" % (r["name"], k, name),
                        "%s=%s\n" % (name, val) in text)
            want = it.expect("replica env (on top of role.env)")
            it.true("%s/%d: %s (D3: MUSTER_RANK0_HOST)" % (r["name"], k, "TORCHX_RANK0_HOST"),
                    "MUSTER_RANK0_HOST=%s\n" % want["TORCHX_RANK0_HOST"] in text)
            it.true("%s/%d: TORCHELASTIC_ERROR_FILE" % (r["name"], k),
                    "TORCHELASTIC_ERROR_FILE=%s/error.json\n" % rdir in text)
            it.true("%s/%d: no PET_LOG_DIR (D3)" % (r["name"], k), "PET_LOG_DIR=" not in text)
    state = json.load(open(os.path.join(app_dir, "state.json")))
    it.eq("the end is recorded in state.json, not SUCCESS (D4)", state.get("state"), "SUCCEEDED")
    it.diverges("on terminal state", "the state is kept in <app dir>/state.json all along (D4)")


@check(C14, "b_state_and_exit")
def c14_states(it):
    env = local_env({"MUSTER_APP_ID_SUFFIX": ""})
    sh = ["run", "-cfg", "fail_fast=false", "utils.sh", "--num_replicas", "2", "--"]
    rc, out, _ = run(sh + ["exit 0"], env)
    it.eq("all rc == 0: %s" % it.expect("all rc == 0"), (rc, status(out.strip())), (0, "SUCCEEDED"))
    rc, out, _ = run(sh + ["[ $MUSTER_REPLICA_ID = 1 ] && exit 7; exit 0"], env)
    it.eq("none alive, any rc != 0: %s" % it.expect("none alive, any rc != 0"),
          status(out.strip()), "FAILED")
    it.eq("CLI exit code: exits 1 unless SUCCEEDED", rc,
          1 if "exits 1 unless final state SUCCEEDED" in it.expect("CLI exit code") else None)
    marker = str(3000000 + os.getpid())
    p = subprocess.Popen([MUSTER] + sh + ["exec sleep " + marker], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ, **env), cwd=WORK, start_new_session=True)
    handle = p.stdout.readline().strip()
    it.eq("any replica alive: %s" % it.expect("any replica alive"),
          wait_status(handle, "RUNNING"), "RUNNING")
    rc, _, _ = run(["cancel", handle], env)
    want = it.expect("cancel")
    it.eq("cancel: %s" % want.split("; ")[-1], (rc, status(handle)), (0, want.split("state ")[-1]))
    p.wait(timeout=60)
    left = subprocess.run(["pgrep", "-f", "^sleep " + marker], capture_output=True, text=True).stdout
    it.eq("cancel leaves no process", left, "")
    rc, out, _ = run(["list"], env)
    it.true("list works (D4; TorchX: %s)" % it.expect("list"), handle in out, out)


def status(handle):
    rc, out, _ = run(["status", handle], local_env())
    m = re.search(r"State: (\w+)", out)
    return m.group(1) if m else "rc %d: %s" % (rc, out)


def wait_status(handle, want, limit=60):
    import time
    deadline = time.time() + limit
    s = status(handle)
    while s != want and time.time() < deadline:
        time.sleep(0.05)
        s = status(handle)
    return s


@check(C14, "c_dist_ddp_1x2_local_cwd (DERIVED)")
def c14_dist_ddp(it):
    argv = it.node["input"]["argv"]
    it.eq("argv", argv[:5], ["torchx", "run", "-s", "local_cwd", "dist.ddp"])
    suffix = it.node["input"]["assumptions"]["make_unique('train')"].split("-")[-1]
    env = local_env({"MUSTER_APP_ID_SUFFIX": suffix})
    env.pop("LOGLEVEL", None)
    it.eq("host LOGLEVEL", it.node["input"]["assumptions"]["host LOGLEVEL"], "unset")
    rc, out, err = run(["run", "-s", "local", "--dryrun"] + argv[4:], dict(env, LOGLEVEL=""))
    app_id = "train-" + suffix
    handle = it.expect("app_handle").replace("local_cwd://torchx/", "local://muster/")
    it.true("app_handle (D1: local://muster/...)", "handle: %s\n" % handle in out, out)
    it.true("popen args: one muster agent, 2 workers (D5)",
            re.search(r"train/0: muster agent --nnodes 1 --nproc-per-node 2 --rdzv-endpoint "
                      r"'127\.0\.0\.1:<port>' --rdzv-id %s" % app_id, out), out)
    it.diverges("popen args", "dist.ddp runs `muster agent` against the embedded musterd (D5)")
    for k, v in it.expect("role env before local additions").items():
        it.true("role env %s" % ENV_NAMES.get(k, k), "%s=%s" % (ENV_NAMES.get(k, k), v) in out)
    runner = it.expect("plus runner env")
    it.true("runner env TORCHX_JOB_ID (D3: MUSTER_JOB_ID)",
            "MUSTER_JOB_ID=%s" % runner["TORCHX_JOB_ID"].replace("local_cwd://torchx/",
                                                                 "local://muster/") in out)
    local = it.expect("plus local env")
    it.true("local env TORCHX_RANK0_HOST (D3)",
            "MUSTER_RANK0_HOST=%s" % local["TORCHX_RANK0_HOST"] in out)
    it.true("local env TORCHELASTIC_ERROR_FILE",
            re.search(r"TORCHELASTIC_ERROR_FILE=\S+/%s/train/0/error.json" % app_id, out))
    it.true("no PET_LOG_DIR (D3)", "PET_LOG_DIR" not in out)
    it.diverges("cwd", "replicas run in the directory of `muster run`, as TorchX's <cwd>")


@check(C14, "d_local_docker_dryrun")
def c14_docker(it):
    rc, _, err = run(["run", "-s", "local_docker", "--dryrun", "utils.echo"], local_env())
    it.eq("no local_docker scheduler (D7): usage error", rc, 2)
    for k in list(it.node["expected"]):
        it.diverges(k, "muster has no docker scheduler (D7)")


# ======================================================= case 15: CLI parsing and formats

C15 = "torchx-15_cli_cfg_mounts_handles_status"


@check(C15, "cfg_from_str")
def c15_cfg(it):
    """TorchX's example runopts K (list), J (str), E (dict) are the kubernetes scheduler's
    image_pull_secret, namespace and labels; the manifest shows what each became. An unknown
    key is an error (D1), not dropped."""
    node = it.node
    it.eq("runopts", node["runopts"], {"K": "List[str] default []", "J": "str required",
                                       "E": "Dict[str,str] default []"})
    names = {"K": "image_pull_secret", "J": "namespace", "E": "labels"}
    conf = os.path.join(WORK, "cfg15")
    with open(conf, "w") as f:
        f.write("[kubernetes]\nqueue = q\n")
    for s, want in node["cases"]:
        mapped = re.sub(r"(^|[,;])([KJE])=", lambda m: m.group(1) + names[m.group(2)] + "=", s)
        rc, out, err = run(["run", "-s", "kubernetes", "--dryrun", "--json"] +
                           (["-cfg", mapped] if mapped else []) + ["utils.echo", "--image", "a"],
                           {"MUSTERCONFIG": conf, "MUSTER_APP_ID": "echo-15"})
        if "UNKWN" in s:
            it.eq("%r: unknown key is an error (D1)" % s, (rc, "unknown -cfg key 'UNKWN'" in err),
                  (2, True))
            continue
        it.eq("%r: exit 0" % s, rc, 0)
        if rc != 0:
            print("#   " + err.strip())
            continue
        d = json.loads(out)
        import yaml
        job = yaml.safe_load(d["request"])
        pod = job["spec"]["tasks"][0]["template"]["spec"]
        got = {}
        if "imagePullSecrets" in pod:
            got["K"] = [x["name"] for x in pod["imagePullSecrets"]]
        if d["app_id"].split(":")[0] != "default":
            got["J"] = d["app_id"].split(":")[0]
        extra = {k: v for k, v in job["metadata"].get("labels", {}).items()
                 if not k.startswith("app.kubernetes.io/")}
        if extra:
            got["E"] = extra
        it.eq("%r" % s, got, want)
    it.true("type casting", "list: split on , or ;" in node["type casting"])
    it.true("unknown keys", node["unknown keys"] == "dropped with a warning")


def env_of(s):
    return role0(dry_json(["dist.ddp", "--script", "t.py", "--env", s]))["env"] if s else {}


BASE_ENV = {"MUSTER_TRACKING_EXPERIMENT_NAME", "MUSTER_TRACKING_RUN_NAME", "LOGLEVEL",
            "MUSTER_JOB_ID"}


@check(C15, "to_dict")
def c15_to_dict(it):
    for s, want in it.node:
        got = {k: v for k, v in env_of(s).items() if k not in BASE_ENV}
        it.eq("--env %r" % s, got, want)


@check(C15, "to_dict_errors (ValueError)")
def c15_to_dict_errors(it):
    for s in it.node:
        rc, _, _ = run(["run", "--dryrun", "dist.ddp", "--script", "t.py", "--env", s])
        it.eq("--env %r: exit 2" % s, rc, 2)


@check(C15, "to_dict_known_limitation")
def c15_limitation(it):
    it.true("the limitation", "unless quoted" in it.node)
    it.eq("a quoted value with '=' works", env_of('FOO="v3=="').get("FOO"), "v3==")


@check(C15, "parse_mounts")
def c15_mounts(it):
    node = it.node
    ms = role0(dry_json(["dist.ddp", "--script", "t.py", "--mounts", ",".join(node["input"])]))["mounts"]
    want = json.loads(json.dumps(node["expected"]).replace("$HOME", WORK))
    got = [{k: m[k] for k in w if k in m} for m, w in zip(ms, want)]
    it.eq("the mounts", got, want)
    errors = {"['src=foo']": "src=foo", "['blah=foo']": "type=bind,blah=foo",
              "['type=bind']": "type=bind", "perm chars outside rwm": "type=device,src=x,perm=rwx",
              "unknown type": "type=nfs,src=a,dst=b"}
    it.eq("the error cases", sorted(node["errors"]), sorted(errors))
    for k, arg in errors.items():
        rc, _, err = run(["run", "--dryrun", "dist.ddp", "--script", "t.py", "--mounts", arg])
        it.eq("%s (%s): exit 2" % (k, node["errors"][k]), rc, 2)
    aliases = {"destination|dst|target": "dst", "source|src": "src",
               "read_only|readonly": "readonly", "perm": "perm", "type": "type"}
    it.eq("aliases", node["aliases"], aliases)
    for names, canon in aliases.items():
        for n in names.split("|"):
            if canon in ("type", "perm"):
                continue
            a = {"dst": "type=bind,src=/a,%s=/b" % n, "src": "type=bind,%s=/a,dst=/b" % n,
                 "readonly": "type=bind,src=/a,dst=/b,%s" % n}[canon]
            m = role0(dry_json(["dist.ddp", "--script", "t.py", "--mounts", a]))["mounts"][0]
            it.eq("alias %s" % n, (m["src_path"], m["dst_path"], m["read_only"]),
                  ("/a", "/b", canon == "readonly"))
    it.true("cli form", node["cli form"].startswith("--mounts type=bind,src=/host"))


@check(C15, "component_name_and_args")
def c15_component_args(it):
    conf = os.path.join(WORK, "cli15")
    with open(conf, "w") as f:
        f.write("[cli:run]\ncomponent = utils.echo\n")
    for argv, want in it.node:
        rc, out, err = run(["run", "--dryrun"] + argv)
        if isinstance(want, list) and argv[-2:] != ["--", "--"]:
            name, args = want
            it.eq("%s: runs %s" % (argv, name), rc, 0)
            msg = after(args, "--msg") if "--msg" in args else "hello world"
            it.true("%s: with %s" % (argv, args), re.search(r"echo/0: echo '?%s'?$" % msg, out, re.M), out)
        elif isinstance(want, list):
            it.eq("%s: a component without script arguments refuses '--' (D2)" % argv, rc, 2)
        else:
            it.eq("%s: %s" % (argv, want), rc, 2)
            if "custom.echo" in want:
                rc, out, _ = run(["run", "--dryrun"] + argv, {"MUSTERCONFIG": conf})
                it.eq("%s with a [cli:run] component: runs it" % argv, rc, 0)


@check(C15, "app_handle")
def c15_handles(it):
    """Each example handle is parsed as TorchX does: the kubernetes ones reach kubectl (the
    recording stand-in) with NAMESPACE and NAME; a local one finds the job in any session."""
    node = it.node
    it.eq("format", node["format"], "{scheduler}://{session_name}/{app_id}")
    fake = {"PATH": os.path.join(GOLDEN, "..", "fixtures", "bin") + ":" + os.environ["PATH"],
            "KUBECTL_RECORD": os.path.join(WORK, "calls15"), "KUBECTL_PHASE": "Running"}
    for handle, (sched, session, app_id) in node["examples"].items():
        if sched in ("k8s", "kubernetes"):
            open(fake["KUBECTL_RECORD"], "w").close()
            run(["status", handle], fake)
            ns, name = app_id.split(":") if ":" in app_id else ("default", app_id)
            calls = open(fake["KUBECTL_RECORD"]).read()
            it.eq("%s -> %s" % (handle, (sched, session, app_id)), calls,
                  "-n %s get jobs.batch.volcano.sh %s -o json\n" % (ns, name))
        else:
            # a local app id is muster's (name-suffix): a job of ours, addressed through the
            # example's scheduler and session
            rc, out, _ = run(["run", "utils.echo"], local_env())
            ours = handle.replace(app_id, out.strip().split("/")[-1])
            rc, out, _ = run(["status", ours], local_env())
            it.true("%s -> %s (with our app id)" % (handle, (sched, session, app_id)),
                    rc == 0 and "State: SUCCEEDED" in out, out)
    # "HANDLE/ROLE/0,1": muster takes one replica (or all of a role) per call (D5)
    m = re.search(r"e\.g\. (\S+)/(\d+(?:,\d+)+)$", node["log identifier regex"])
    rc, _, err = run(["log", m.group(1) + "/" + m.group(2)], fake)
    it.eq("log %s/%s: a list of replicas is a usage error (D5)" % (m.group(1), m.group(2)),
          (rc, "is not a replica number" in err), (2, True))
    for k in m.group(2).split(","):
        open(fake["KUBECTL_RECORD"], "w").close()
        run(["log", "%s/%s" % (m.group(1), k)], dict(fake, KUBECTL_PHASE="Completed"))
        calls = open(fake["KUBECTL_RECORD"]).read().splitlines()
        it.eq("log %s/%s reads its pod" % (m.group(1), k), [c for c in calls if " logs " in c],
              ["-n default logs app-x-trainer-%s-0" % k])


def status_job(it):
    """A job in the case's shape: role 'worker', replica 0 FAILED (exit 1, with an error file
    holding the case's structured error), replica 1 RUNNING. Returns its handle and Popen."""
    inp = it.node["input"]
    r0, r1 = inp["roles"][0]["replicas"]
    comp = os.path.join(WORK, "status15.yaml")
    err_json = json.loads(r0["structured_error_msg"])
    marker = str(4000000 + os.getpid())
    with open(comp, "w") as f:
        json.dump({"name": "st", "description": "TorchX case 15 status", "app": {"name": "st", "roles": [{
            "name": inp["roles"][0]["role"], "entrypoint": "sh", "num_replicas": "2",
            "args": ["-c", "if [ $MUSTER_REPLICA_ID = 0 ]; then printf '%%s' '%s' > "
                     "$TORCHELASTIC_ERROR_FILE; exit 1; fi; exec sleep %s" %
                     (json.dumps(err_json), marker)]}]}}, f)
    env = local_env()
    p = subprocess.Popen([MUSTER, "run", "-cfg", "fail_fast=false,grace_period=1", "./status15.yaml"],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ, **env), cwd=WORK,
                         start_new_session=True)
    handle = p.stdout.readline().strip()
    import time
    deadline = time.time() + 60
    while time.time() < deadline:
        rc, out, _ = run(["status", handle], env)
        if "[0]:FAILED" in out and "[1]:RUNNING" in out:
            break
        time.sleep(0.05)
    return handle, p, marker


@check(C15, "status_text_format")
def c15_status(it):
    inp = it.node["input"]
    handle, p, marker = status_job(it)
    try:
        rc, text, _ = run(["status", handle], local_env())
        want = it.expect("expected_text (whitespace-insensitive, TZ=Europe/London)")
        role = inp["roles"][0]["role"]
        for line in want.splitlines():
            line = line.strip()
            if not line or "timestamp" in line:
                continue  # the error file's timestamp line: muster prints no timestamp (D3)
            if line.startswith("*%s[0]:FAILED (exitcode:" % role):
                line = "*%s[0]:FAILED (exitcode: 1)" % role  # the process's own status (D3)
            if line.startswith("error_msg:"):
                print("# %s: status_text_format: muster prints no error_msg from a replica's "
                      "error file (D3)" % C15)
                continue
            if line.startswith("hostname:"):  # printed for finished replicas only (D3)
                it.true("text has %r" % line, "\n        hostname: " in text, text)
                continue
            it.true("text has %r" % line, line in text, text)
        rc, js, _ = run(["status", "--json", handle], local_env())
        got = json.loads(js)
        want = it.expect("expected_json (torchx status --json)")
        it.eq("json: top level", (got["state"], got["num_restarts"], got["msg"],
                                  got["structured_error_msg"], got["url"]),
              (want["state"], want["num_restarts"], want["msg"], want["structured_error_msg"],
               want["url"]))
        reps = got["roles"][0]["replicas"]
        it.eq("json: replicas (numeric states)", [(r["id"], r["state"], r["role"]) for r in reps],
              [(r["id"], r["state"], r["role"]) for r in want["roles"][0]["replicas"]])
        it.true("note", it.expect("note").startswith("top-level state is the NAME"))
    finally:
        run(["cancel", handle], local_env())
        p.wait(timeout=60)


@check(C15, "appstatus_repr_yaml")
def c15_repr(it):
    it.true("the repr is YAML of an AppStatus", it.node.startswith("AppStatus:\n"))
    print("# %s: appstatus_repr_yaml: muster diverges: no Python repr; `muster status --json` "
          "is the machine-readable form (D3)" % C15)


@check(C15, "AppState")
def c15_app_state(it):
    """The numbers of the states, as `muster status --json` shows them for replicas, and the
    names `muster status` shows: checked on jobs that end in each terminal state."""
    env = local_env({"MUSTER_APP_ID_SUFFIX": ""})
    for cmd, name in (("exit 0", "SUCCEEDED"), ("exit 3", "FAILED")):
        rc, out, _ = run(["run", "utils.sh", "--", cmd], env)
        rc, js, _ = run(["status", "--json", out.strip()], env)
        d = json.loads(js)
        it.eq("%s is %d" % (name, it.node[name]), (d["state"], d["roles"][0]["replicas"][0]["state"]),
              (name, it.node[name]))
    it.eq("the order of the names", list(it.node),
          ["UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED",
           "UNKNOWN"])
    it.eq("the numbers", list(it.node.values()), list(range(8)))


# =========================================================================== the driver

def main():
    os.environ.update(HOME=WORK, MUSTERCONFIG="", MUSTER_LOG_DIR=os.path.join(WORK, "logs"))
    known = sorted({c for c, _ in CHECKS})
    cases = sorted(d for d in os.listdir(GOLDEN)
                   if d.startswith("torchx-") and os.path.isfile(os.path.join(GOLDEN, d, "case.json"))
                   and "_k8s_" not in d and "_slurm_" not in d)
    tap(cases == known, "every command-line case folder has checks here",
        "folders %s, checks for %s" % (cases, known))
    for case in cases:
        data = json.load(open(os.path.join(GOLDEN, case, "case.json")))
        if "subcases" in data:
            items = [(s["name"], s) for s in data["subcases"]]
            rest = set(data) - DESCRIPTIONS - {"subcases"}
            tap(not rest, "%s: no top-level key besides the subcases" % case, str(rest))
        else:
            items = [(k, v) for k, v in data.items() if k not in DESCRIPTIONS]
        names = {n for n, _ in items}
        for (c, i) in CHECKS:
            if c == case and i not in names:
                tap(False, "%s: the check of %r has no item in case.json (renamed?)" % (case, i))
        for name, node in items:
            fn = CHECKS.get((case, name))
            if fn is None:
                tap(False, "%s: item %r has a check" % (case, name),
                    "write one in tests/golden/torchx_cli_cases.py")
                continue
            it = Item(case, name, node)
            try:
                fn(it)
            except Exception as e:  # noqa: BLE001
                tap(False, "%s: %s: the check ran" % (case, name), "%s: %s" % (type(e).__name__, e))
                continue
            if isinstance(node, dict) and isinstance(node.get("expected"), dict):
                unread = sorted(set(node["expected"]) - it.read)
                tap(not unread, "%s: %s: every expected key is checked" % (case, name),
                    "unread: %s" % unread)
    print("# %d passed, %d failed" % (passes, fails))
    return 1 if fails or not passes else 0


if __name__ == "__main__":
    sys.exit(main())
