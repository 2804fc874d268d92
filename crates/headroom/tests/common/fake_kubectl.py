#!/usr/bin/env python3
"""A stand-in for `kubectl` against a cluster of local processes, for
`headroom k8s run` tests (no cluster is reachable in CI).

Each Job applied has its own state (`jobs/NAME/`: several Jobs one after
another, as `capacity --k8s` applies them); `job.json` is the last one.
`apply -f -` takes the ConfigMap and Indexed Job as JSON, lays the
ConfigMap out as its volume would be, and starts each pod: a supervisor
process that runs the container's arguments exactly (JOB_COMPLETION_INDEX
expanded, /scenario mapped to the volume) with stdout and stderr in one log,
as `kubectl logs` shows them. `get pods` reports their phases, `logs -f`
follows a log until the container ends, `patch … suspend` sends every
running pod of the Job SIGTERM (as the Job controller deleting them does),
`delete` records what was deleted (`deleted`, one line each) and stops the
Job's pods.

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
    os.makedirs(os.path.dirname(path(name)), exist_ok=True)
    with open(path(name), "w") as f:
        f.write(text)


def in_job(name, file):
    """A file of Job `name`'s state, relative to STATE."""
    return os.path.join("jobs", name, file)


def job_named(args):
    """The Job an invocation is about: `job/NAME` or `-l headroom/job=NAME`
    among its arguments, else the last one applied."""
    for a in args:
        if a.startswith("job/"):
            return a[len("job/") :]
        if a.startswith("headroom/job="):
            return a[len("headroom/job=") :]
    return job()["metadata"]["name"]


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


def job(name=None):
    return json.loads(read("job.json" if name is None else in_job(name, "job.json")))


def pod_name(name, i):
    return "%s-%d-fake" % (name, i)


def apply():
    items = json.load(sys.stdin)["items"]
    os.makedirs(path("volume"), exist_ok=True)
    config = next(o for o in items if o["kind"] == "ConfigMap")
    the_job = next(o for o in items if o["kind"] == "Job")
    name = the_job["metadata"]["name"]
    write("job.json", json.dumps(the_job))
    write(in_job(name, "job.json"), json.dumps(the_job))
    pod = the_job["spec"]["template"]["spec"]
    for item in pod["volumes"][0]["configMap"]["items"]:
        target = path("jobs", name, "volume", item["path"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(config["data"][item["key"]])
    shards = the_job["spec"]["completions"]
    for i in range(shards):
        if i in never_start():
            continue
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "__pod", name, str(i)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    print("configmap/%s created" % config["metadata"]["name"])
    print("job.batch/%s created" % the_job["metadata"]["name"])


def run_pod(name, i):
    """The pod's life: wait (a late pod), run the container, keep its exit."""
    # Named apart from `kubectl` (python3 too): orphaned by `apply`, the
    # pod lands under headroom, which as a study adopts orphans as the
    # server's; a real pod lives under the container runtime.
    with open("/proc/self/comm", "w") as comm:
        comm.write("fake-pod")
    time.sleep(late().get(i, 0))
    if read(in_job(name, "suspended")):
        return
    container = job(name)["spec"]["template"]["spec"]["containers"][0]
    volume = path("jobs", name, "volume")
    args = [
        a.replace("$(JOB_COMPLETION_INDEX)", str(i)).replace("/scenario", volume)
        for a in container["args"]
    ]
    with open(path(in_job(name, "pod-%d.log" % i)), "w") as log:
        child = subprocess.Popen(
            [os.environ["FAKE_HEADROOM"]] + args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        write(in_job(name, "pod-%d.pid" % i), str(child.pid))
        code = child.wait()
    write(in_job(name, "pod-%d.exit" % i), str(code))


def phase(name, i):
    exit_code = read(in_job(name, "pod-%d.exit" % i))
    if exit_code is not None:
        return "Succeeded" if exit_code.strip() == "0" else "Failed"
    if read(in_job(name, "pod-%d.pid" % i)) is not None:
        return "Running"
    return "Pending"


def get_pods(name):
    if read(in_job(name, "job.json")) is None:
        print("" if "name" in sys.argv else json.dumps({"items": []}))
        return
    shards = job(name)["spec"]["completions"]
    items = []
    for i in range(shards):
        p = phase(name, i)
        if p == "Pending" and read(in_job(name, "suspended")):
            continue  # deleted with the suspended Job
        status = {"phase": p}
        if p == "Pending":
            status["containerStatuses"] = [
                {"state": {"waiting": {"reason": "ContainerCreating"}}}
            ]
        if "name" in sys.argv:
            print("pod/" + pod_name(name, i))
            continue
        items.append(
            {
                "metadata": {
                    "name": pod_name(name, i),
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
    pod = args[-1].split("/")[-1]
    name, i, _ = pod.rsplit("-", 2)
    i = int(i)
    follow = "-f" in args
    if phase(name, i) == "Pending":
        sys.stderr.write(
            'container "headroom" in pod "%s" is waiting to start: ContainerCreating\n' % pod
        )
        sys.exit(1)
    log = in_job(name, "pod-%d.log" % i)
    offset = 0
    while True:
        text = read(log, "")
        done = read(in_job(name, "pod-%d.exit" % i)) is not None
        sys.stdout.write(text[offset:])
        sys.stdout.flush()
        offset = len(text)
        if done or not follow:
            if done:
                sys.stdout.write(read(log, "")[offset:])
            return
        time.sleep(0.05)


def stop_pods(name):
    for i in range(job(name)["spec"]["completions"]):
        pid = read(in_job(name, "pod-%d.pid" % i))
        if pid and read(in_job(name, "pod-%d.exit" % i)) is None:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass


def main():
    args = sys.argv[1:]
    if args[:1] == ["__pod"]:
        run_pod(args[1], int(args[2]))
        return
    with open(path("calls"), "a") as f:
        f.write(" ".join(args) + "\n")
    verb = args[0]
    if verb == "apply":
        apply()
    elif verb == "get" and args[1] == "pods" and "-A" in args:
        print(json.dumps({"items": []}))
    elif verb == "get" and args[1] == "pods":
        get_pods(job_named(args))
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
        name = job_named(args)
        write(in_job(name, "suspended"), "yes")
        stop_pods(name)
    elif verb == "delete":
        with open(path("deleted"), "a") as f:
            f.write(" ".join(args) + "\n")
        stop_pods(job_named(args))
    else:
        sys.stderr.write("fake kubectl: %s not understood\n" % " ".join(args))
        sys.exit(1)


if __name__ == "__main__":
    main()
