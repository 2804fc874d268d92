#!/usr/bin/env python3
"""A stand-in for `kubectl` against a cluster of local processes, for
`headroom k8s run` tests (no cluster is reachable in CI).

`apply -f -` takes the ConfigMap and Indexed Job as JSON, lays the
ConfigMap out as its volume would be, and starts each pod: a supervisor
process that runs the container's arguments exactly (JOB_COMPLETION_INDEX
expanded, /scenario mapped to the volume) with stdout and stderr in one log,
as `kubectl logs` shows them. `get pods` reports their phases, `logs -f`
follows a log until the container ends, `patch … suspend` sends every
running pod SIGTERM (as the Job controller deleting them does), `delete`
records what was deleted.

Environment: FAKE_KUBE_DIR (state), FAKE_HEADROOM (the image's binary),
FAKE_NEVER_START ("2": the shard indexes whose pods stay
ContainerCreating), FAKE_LATE ("1:3": index 1 starts 3 s late),
FAKE_NODE_CPU (allocatable CPUs of the one node, default 8),
FAKE_NS_LABELS (the namespace's labels, JSON).
"""

import json
import os
import signal
import subprocess
import sys
import time

STATE = os.environ.get("FAKE_KUBE_DIR", "/tmp/fake-kube")
INDEX = "batch.kubernetes.io/job-completion-index"


def path(*parts):
    return os.path.join(STATE, *parts)


def read(name, default=None):
    try:
        with open(path(name)) as f:
            return f.read()
    except OSError:
        return default


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)


def never_start():
    text = os.environ.get("FAKE_NEVER_START", "")
    return {int(i) for i in text.split(",") if i}


def late():
    text = os.environ.get("FAKE_LATE", "")
    out = {}
    for item in filter(None, text.split(",")):
        i, secs = item.split(":")
        out[int(i)] = float(secs)
    return out


def job():
    return json.loads(read("job.json"))


def pod_name(i):
    return "%s-%d-fake" % (job()["metadata"]["name"], i)


def apply():
    items = json.load(sys.stdin)["items"]
    os.makedirs(path("volume"), exist_ok=True)
    config = next(o for o in items if o["kind"] == "ConfigMap")
    the_job = next(o for o in items if o["kind"] == "Job")
    write("job.json", json.dumps(the_job))
    pod = the_job["spec"]["template"]["spec"]
    for item in pod["volumes"][0]["configMap"]["items"]:
        target = path("volume", item["path"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(config["data"][item["key"]])
    shards = the_job["spec"]["completions"]
    for i in range(shards):
        if i in never_start():
            continue
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "__pod", str(i)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    print("configmap/%s created" % config["metadata"]["name"])
    print("job.batch/%s created" % the_job["metadata"]["name"])


def run_pod(i):
    """The pod's life: wait (a late pod), run the container, keep its exit."""
    time.sleep(late().get(i, 0))
    if read("suspended"):
        return
    container = job()["spec"]["template"]["spec"]["containers"][0]
    args = [
        a.replace("$(JOB_COMPLETION_INDEX)", str(i)).replace("/scenario", path("volume"))
        for a in container["args"]
    ]
    with open(path("pod-%d.log" % i), "w") as log:
        child = subprocess.Popen(
            [os.environ["FAKE_HEADROOM"]] + args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        write("pod-%d.pid" % i, str(child.pid))
        code = child.wait()
    write("pod-%d.exit" % i, str(code))


def phase(i):
    if read("pod-%d.exit" % i) is not None:
        return "Succeeded" if read("pod-%d.exit" % i).strip() == "0" else "Failed"
    if read("pod-%d.pid" % i) is not None:
        return "Running"
    return "Pending"


def get_pods():
    shards = job()["spec"]["completions"]
    items = []
    for i in range(shards):
        p = phase(i)
        if p == "Pending" and read("suspended"):
            continue  # deleted with the suspended Job
        status = {"phase": p}
        if p == "Pending":
            status["containerStatuses"] = [
                {"state": {"waiting": {"reason": "ContainerCreating"}}}
            ]
        if "name" in sys.argv:
            print("pod/" + pod_name(i))
            continue
        items.append(
            {
                "metadata": {
                    "name": pod_name(i),
                    "annotations": {INDEX: str(i)},
                    "labels": {INDEX: str(i)},
                },
                "spec": {"nodeName": "127.0.0.1"},
                "status": status,
            }
        )
    if "name" not in sys.argv:
        print(json.dumps({"items": items}))


def logs(args):
    name = args[-1].split("/")[-1]
    i = int(name.rsplit("-", 2)[1])
    follow = "-f" in args
    if phase(i) == "Pending":
        sys.stderr.write(
            'container "headroom" in pod "%s" is waiting to start: ContainerCreating\n' % name
        )
        sys.exit(1)
    offset = 0
    while True:
        text = read("pod-%d.log" % i, "")
        done = read("pod-%d.exit" % i) is not None
        sys.stdout.write(text[offset:])
        sys.stdout.flush()
        offset = len(text)
        if done or not follow:
            if done:
                sys.stdout.write(read("pod-%d.log" % i, "")[offset:])
            return
        time.sleep(0.05)


def stop_pods():
    for i in range(job()["spec"]["completions"]):
        pid = read("pod-%d.pid" % i)
        if pid and read("pod-%d.exit" % i) is None:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass


def main():
    args = sys.argv[1:]
    if args[:1] == ["__pod"]:
        run_pod(int(args[1]))
        return
    with open(path("calls"), "a") as f:
        f.write(" ".join(args) + "\n")
    verb = args[0]
    if verb == "apply":
        apply()
    elif verb == "get" and args[1] == "pods" and "-A" in args:
        print(json.dumps({"items": []}))
    elif verb == "get" and args[1] == "pods":
        get_pods()
    elif verb == "get" and args[1] == "nodes":
        cpu = os.environ.get("FAKE_NODE_CPU", "8")
        print(
            json.dumps(
                {
                    "items": [
                        {
                            "metadata": {"name": "127.0.0.1", "labels": {}},
                            "spec": {},
                            "status": {
                                "allocatable": {"cpu": cpu},
                                "conditions": [{"type": "Ready", "status": "True"}],
                            },
                        }
                    ]
                }
            )
        )
    elif verb == "get" and args[1] == "namespace":
        labels = json.loads(os.environ.get("FAKE_NS_LABELS", "{}"))
        print(json.dumps({"metadata": {"name": args[2], "labels": labels}}))
    elif verb == "get" and args[1] == "events":
        print(json.dumps({"items": []}))
    elif verb == "logs":
        logs(args)
    elif verb == "patch":
        write("suspended", "yes")
        stop_pods()
    elif verb == "delete":
        write("deleted", " ".join(args))
        stop_pods()
    else:
        sys.stderr.write("fake kubectl: %s not understood\n" % " ".join(args))
        sys.exit(1)


if __name__ == "__main__":
    main()
