"""Static checks of the deployment files in deploy/ (no Docker, no cluster).

Docker cannot run on our machines, so the Dockerfile, the Kubernetes example
and the systemd unit are validated here against the real binary and the repo:

- every YAML manifest parses (all documents), with a known apiVersion/kind;
- the sidecar is wired: a container named ``remold``, probes on the
  ``--metrics-listen`` port at /healthz and /readyz, mounts backed by
  volumes, volumes by ConfigMaps that exist, the application pointed at
  remold's --listen address, a termination grace period that covers the
  drain;
- every ``--flag`` of the Kubernetes args, the Dockerfile ENTRYPOINT/CMD and
  the systemd ExecStart is in ``remold serve --help``, and remold itself
  accepts their values (see ``assert_remold_accepts``);
- every key of the example config files is a real key (a flag of --help,
  ``--x-y`` <-> ``x_y``);
- the rules ConfigMap holds valid rules (``remold check``);
- the Dockerfile copies what the build reads (its .dockerignore hiding none
  of it), installs the -dev packages for every find_package() (a subset of
  scripts/install-deps.sh) and, at run time, exactly the packages of the
  libraries the binary links;
- the systemd unit has [Unit]/[Service]/[Install], installs the binary where
  the Dockerfile and the README say, and stops within its timeout;
- deploy/README.md lists every file of deploy/.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

import pytest
import yaml

from conftest import SOURCE_DIR, require_binary

DEPLOY = SOURCE_DIR / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
DOCKERFILE = DEPLOY / "Dockerfile"
SYSTEMD_UNIT = DEPLOY / "systemd" / "remold.service"
# Example config files (plain remold.yaml, not manifests).
CONFIG_EXAMPLES = [DEPLOY / "docker" / "remold.yaml", DEPLOY / "systemd" / "remold.yaml"]
# Where the unit's --config points, and the file of deploy/ installed there.
SYSTEMD_CONFIG_INSTALLED = "/etc/remold/remold.yaml"
SYSTEMD_CONFIG_SOURCE = DEPLOY / "systemd" / "remold.yaml"
# Where the Dockerfile's build stage writes the binary.
DOCKER_BUILD_OUTPUT = "/src/build/remold"

DEFAULT_DRAIN_TIMEOUT_MS = 30_000   # remold serve --help
DEFAULT_GRACE_PERIOD_S = 30         # Kubernetes' terminationGracePeriodSeconds
# A flag remold does not know: `remold serve ... SENTINEL x` loads the config
# file and applies the flags before it (refusing a bad key or value), then
# stops at the sentinel without binding anything.
SENTINEL = "--deploy-test-sentinel"

# apiVersion of every kind the manifests may use.
API_VERSIONS = {
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "ServiceAccount": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet"}

# find_package() / pkg_check_modules() name -> Debian 12 package with its
# headers and CMake files. A name missing here fails the test: add it.
BUILD_PACKAGES = {
    "Boost": "libboost1.74-dev",
    "bson-1.0": "libbson-dev",
    "mongoc-1.0": "libmongoc-dev",
    "spdlog": "libspdlog-dev",
    "fmt": "libfmt-dev",
    "yaml-cpp": "libyaml-cpp-dev",
    "Snappy": "libsnappy-dev",
    "ZLIB": "zlib1g-dev",
    "PkgConfig": "pkg-config",
    "libzstd": "libzstd-dev",
    "OpenSSL": "libssl-dev",
    "GTest": "libgtest-dev",
    "benchmark": "libbenchmark-dev",
    "Threads": None,  # libc
}
# Part of debian:12-slim; the runtime stage need not install them.
SLIM_BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}


# --------------------------------------------------------------------------
# What the binary says.


@pytest.fixture(scope="module")
def serve_help() -> str:
    result = subprocess.run([str(require_binary()), "serve", "--help"], capture_output=True,
                            text=True, timeout=10)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def serve_flags(serve_help) -> dict[str, str]:
    """--flag -> its help line."""
    flags = {}
    for line in serve_help.splitlines():
        match = re.match(r"^\s+(--[a-z0-9][a-z0-9-]*)\s", line)
        if match:
            flags[match.group(1)] = line
    assert "--listen" in flags and "--metrics-listen" in flags, serve_help
    return flags


@pytest.fixture(scope="module")
def config_keys(serve_flags) -> set[str]:
    return {flag[2:].replace("-", "_") for flag in serve_flags if flag != "--config"}


def assert_remold_accepts(args: list[str], what: str) -> None:
    """``remold serve ARGS SENTINEL x`` gets as far as the sentinel.

    remold loads --config, then applies every flag in order, so reaching the
    sentinel means each key, flag and value was accepted. (Checks made after
    all flags, such as the rules directory existing, are not reached.)
    """
    result = subprocess.run([str(require_binary()), "serve", *args, SENTINEL, "x"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert result.returncode != 0 and f"unknown flag '{SENTINEL}'" in result.stderr, (
        f"{what}: remold refused `serve {shlex.join(args)}`: {result.stderr.strip()}")


def flag_pairs(args: list[str], serve_flags: dict[str, str], what: str) -> dict[str, str]:
    """--flag value pairs of a `remold serve` command line; every flag takes a value."""
    pairs: dict[str, str] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag.startswith("--"), f"{what}: {flag!r} where a --flag was expected in {args}"
        assert flag in serve_flags, (f"{what}: {flag!r} is not a flag of `remold serve --help` "
                                     f"(remold takes `--flag value`, not `--flag=value`)")
        assert i + 1 < len(args), f"{what}: {flag} has no value"
        pairs[flag] = args[i + 1]
        i += 2
    return pairs


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0].strip("[]")


def assert_config_keys(config: dict, config_keys: set[str], what: str) -> None:
    assert isinstance(config, dict), f"{what}: expected a mapping of keys to values"
    unknown = sorted(set(config) - config_keys)
    assert not unknown, f"{what}: unknown key(s) {unknown}; known: {sorted(config_keys)}"
    for key, value in config.items():
        assert not isinstance(value, (dict, list)), f"{what}: {key}: expected a single value"


# --------------------------------------------------------------------------
# Kubernetes manifests.


def manifest_files() -> list[Path]:
    files = sorted([*KUBERNETES.glob("*.yaml"), *KUBERNETES.glob("*.yml")])
    assert files, f"no manifests in {KUBERNETES}"
    return files


@pytest.fixture(scope="module")
def manifests() -> list[tuple[Path, dict]]:
    docs = []
    for path in manifest_files():
        with path.open() as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.append((path, doc))
    return docs


@pytest.fixture(scope="module")
def config_maps(manifests) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests if doc.get("kind") == "ConfigMap"}


@dataclass
class Sidecar:
    path: Path
    workload: dict
    pod: dict                    # the pod spec
    container: dict              # the remold container
    flags: dict[str, str]        # its --flag value pairs
    config: dict = field(default_factory=dict)  # remold.yaml named by --config, if any

    def setting(self, flag: str) -> Optional[str]:
        """The value in force: the flag, else the config file's key."""
        if flag in self.flags:
            return self.flags[flag]
        value = self.config.get(flag[2:].replace("-", "_"))
        return None if value is None else str(value)


def pod_containers(pod: dict) -> list[dict]:
    # A native sidecar (Kubernetes 1.29+) is an init container with restartPolicy: Always.
    return [*pod.get("containers", []),
            *[c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"]]


def mounted_config_map_entry(pod: dict, container: dict, path: str,
                             config_maps: dict[str, dict]) -> tuple[str, str]:
    """(ConfigMap name, key) of the file ``path`` inside ``container``."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    target = PurePosixPath(path)
    for mount in container.get("volumeMounts", []):
        mount_path = PurePosixPath(mount["mountPath"])
        volume = volumes.get(mount["name"], {})
        if "configMap" not in volume:
            continue
        name = volume["configMap"]["name"]
        items = {i["path"]: i["key"] for i in volume["configMap"].get("items", [])}
        if mount.get("subPath"):
            if mount_path == target:
                return name, items.get(mount["subPath"], mount["subPath"])
        elif target.parent == mount_path:
            return name, items.get(target.name, target.name)
    raise AssertionError(f"{path} is not a file of a ConfigMap mounted in container "
                         f"{container['name']}")


@pytest.fixture(scope="module")
def sidecars(manifests, config_maps, serve_flags) -> list[Sidecar]:
    found = []
    for path, doc in manifests:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod_containers(pod):
            if container["name"] != "remold":
                continue
            what = f"{path.name}: container remold"
            # The image's ENTRYPOINT is `remold serve`; a command must say the same.
            command = container.get("command")
            assert command in (None, ["remold", "serve"], ["/usr/local/bin/remold", "serve"]), (
                f"{what}: command {command} is not `remold serve`")
            args = [str(a) for a in container.get("args", [])]
            flags = flag_pairs(args, serve_flags, what)
            sidecar = Sidecar(path, doc, pod, container, flags)
            if "--config" in flags:
                name, key = mounted_config_map_entry(pod, container, flags["--config"], config_maps)
                assert name in config_maps and key in config_maps[name].get("data", {}), (
                    f"{what}: --config {flags['--config']} is ConfigMap {name} key {key}, "
                    f"which the manifests do not define")
                sidecar.config = yaml.safe_load(config_maps[name]["data"][key]) or {}
            found.append(sidecar)
    assert found, "no workload in deploy/kubernetes has a container named remold"
    return found


def test_manifests_parse_with_known_kinds(manifests):
    assert manifests
    for path, doc in manifests:
        kind = doc.get("kind")
        assert kind in API_VERSIONS, f"{path.name}: kind {kind!r} (known: {sorted(API_VERSIONS)})"
        assert doc.get("apiVersion") == API_VERSIONS[kind], (
            f"{path.name}: {kind} has apiVersion {doc.get('apiVersion')!r}, "
            f"expected {API_VERSIONS[kind]}")
        assert doc.get("metadata", {}).get("name"), f"{path.name}: {kind} without metadata.name"
    # `kubectl apply -f deploy/kubernetes/` applies every file there: no other YAML
    # (a kustomization.yaml, say) may sit beside the manifests.
    names = [(doc["kind"], doc["metadata"]["name"]) for _, doc in manifests]
    assert len(names) == len(set(names)), f"duplicate objects: {names}"


def test_workload_selectors_match_template_labels(manifests):
    for path, doc in manifests:
        if doc["kind"] in WORKLOAD_KINDS:
            selector = doc["spec"]["selector"]["matchLabels"]
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), f"{path.name}: selector {selector} vs {labels}"


def test_mounts_volumes_and_config_maps_exist(manifests, config_maps):
    for path, doc in manifests:
        if doc["kind"] not in WORKLOAD_KINDS:
            continue
        pod = doc["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in [*pod.get("containers", []), *pod.get("initContainers", [])]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, (
                    f"{path.name}: {container['name']} mounts volume {mount['name']!r}, "
                    f"not in volumes {sorted(volumes)}")
        for volume in volumes.values():
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                assert name in config_maps, (f"{path.name}: volume {volume['name']} names "
                                             f"ConfigMap {name!r}, not defined in the manifests")
                for item in volume["configMap"].get("items", []):
                    assert item["key"] in config_maps[name].get("data", {}), (name, item)
        for container in pod.get("containers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef")
                if ref and not ref.get("optional"):
                    assert ref["key"] in config_maps.get(ref["name"], {}).get("data", {}), ref


def test_sidecar_flags_exist_and_are_accepted(sidecars, config_maps, tmp_path):
    for sidecar in sidecars:
        args = [str(a) for a in sidecar.container.get("args", [])]
        # remold reads --config here: give it the ConfigMap's file.
        if "--config" in sidecar.flags:
            local = tmp_path / "remold.yaml"
            local.write_text(yaml.safe_dump(sidecar.config))
            args[args.index("--config") + 1] = str(local)
        assert_remold_accepts(args, f"{sidecar.path.name}: container remold")


def test_sidecar_config_file_keys(sidecars, config_keys):
    for sidecar in sidecars:
        assert_config_keys(sidecar.config, config_keys, f"{sidecar.path.name}: remold.yaml")
        assert sidecar.setting("--backend"), f"{sidecar.path.name}: no backend in args or config"


def test_sidecar_rules_config_map_is_valid_and_reloadable(sidecars, config_maps, tmp_path):
    binary = require_binary()
    for sidecar in sidecars:
        rules_dir = sidecar.setting("--rules")
        assert rules_dir, f"{sidecar.path.name}: remold runs without --rules"
        volumes = {v["name"]: v for v in sidecar.pod.get("volumes", [])}
        mounts = [m for m in sidecar.container.get("volumeMounts", [])
                  if PurePosixPath(m["mountPath"]) == PurePosixPath(rules_dir)]
        assert len(mounts) == 1, f"{sidecar.path.name}: nothing mounted at --rules {rules_dir}"
        mount = mounts[0]
        # A subPath mount never sees ConfigMap updates: hot reload needs the directory.
        assert not mount.get("subPath"), f"{sidecar.path.name}: rules mounted with subPath"
        volume = volumes[mount["name"]]
        assert "configMap" in volume, f"{sidecar.path.name}: rules volume is not a ConfigMap"
        config_map = config_maps[volume["configMap"]["name"]]
        data = config_map.get("data", {})
        rule_files = {k: v for k, v in data.items() if k.endswith((".yaml", ".yml"))}
        assert rule_files, f"ConfigMap {config_map['metadata']['name']} holds no rule file"
        directory = tmp_path / config_map["metadata"]["name"]
        directory.mkdir()
        for key, text in data.items():
            (directory / key).write_text(text)
        result = subprocess.run([str(binary), "check", str(directory)], capture_output=True,
                                text=True, timeout=30)
        assert result.returncode == 0, (f"ConfigMap {config_map['metadata']['name']}: remold "
                                        f"check failed:\n{result.stdout}{result.stderr}")
        assert f"{len(rule_files)} rule(s) OK" in result.stdout, result.stdout


def test_sidecar_probes_on_metrics_port(sidecars, serve_flags):
    # --help says what the metrics listener serves; the probes use those paths.
    assert "/healthz" in serve_flags["--metrics-listen"]
    assert "/readyz" in serve_flags["--metrics-listen"]
    for sidecar in sidecars:
        what = f"{sidecar.path.name}: container remold"
        metrics = sidecar.setting("--metrics-listen")
        assert metrics, f"{what}: no --metrics-listen, so nothing serves the probes"
        # The kubelet probes the pod IP, not the container's loopback.
        assert host_of(metrics) in ("0.0.0.0", "::"), f"{what}: --metrics-listen {metrics}"
        named_ports = {p["name"]: p["containerPort"] for p in sidecar.container.get("ports", [])
                       if "name" in p}
        assert port_of(metrics) in [p["containerPort"] for p in sidecar.container.get("ports", [])], (
            f"{what}: the metrics port {port_of(metrics)} is not a containerPort")
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            http = sidecar.container.get(probe, {}).get("httpGet")
            assert http, f"{what}: no {probe}.httpGet"
            assert http["path"] == path, f"{what}: {probe} path {http['path']}, expected {path}"
            port = named_ports.get(http["port"], http["port"])
            assert port == port_of(metrics), (f"{what}: {probe} port {http['port']} is not the "
                                             f"--metrics-listen port {port_of(metrics)}")
        annotations = sidecar.workload["spec"]["template"]["metadata"].get("annotations", {})
        if "prometheus.io/port" in annotations:
            assert int(annotations["prometheus.io/port"]) == port_of(metrics)


def test_application_connects_through_remold(sidecars):
    for sidecar in sidecars:
        listen = sidecar.setting("--listen")
        assert listen, f"{sidecar.path.name}: remold without --listen (default is port 27018)"
        # In a pod, the other containers reach it on the shared loopback.
        assert host_of(listen) == "127.0.0.1", f"{sidecar.path.name}: --listen {listen}"
        wanted = f"mongodb://{listen}"
        others = [c for c in sidecar.pod.get("containers", []) if c["name"] != "remold"]
        assert others, f"{sidecar.path.name}: remold has no application beside it"
        values = [str(e.get("value", "")) for c in others for e in c.get("env", [])]
        assert any(v.startswith(wanted) for v in values), (
            f"{sidecar.path.name}: no application env value starts with {wanted}: {values}")


def test_sidecar_security_and_resources(sidecars):
    for sidecar in sidecars:
        what = f"{sidecar.path.name}: container remold"
        pod_security = sidecar.pod.get("securityContext", {})
        security = sidecar.container.get("securityContext", {})
        assert security.get("readOnlyRootFilesystem") is True, what
        assert security.get("allowPrivilegeEscalation") is False, what
        assert security.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True, what
        resources = sidecar.container.get("resources", {})
        assert resources.get("requests", {}).get("memory"), f"{what}: no memory request"
        assert resources.get("requests", {}).get("cpu"), f"{what}: no cpu request"
        assert resources.get("limits", {}).get("memory"), f"{what}: no memory limit"
        uid = security.get("runAsUser", pod_security.get("runAsUser"))
        if uid is not None:
            assert str(uid) == dockerfile_user().split(":")[0], (
                f"{what}: runAsUser {uid} is not the image's USER {dockerfile_user()}")


def test_termination_grace_covers_the_drain(sidecars):
    for sidecar in sidecars:
        what = f"{sidecar.path.name}: container remold"
        drain_ms = int(sidecar.setting("--drain-timeout-ms") or DEFAULT_DRAIN_TIMEOUT_MS)
        pre_stop_s = 0
        hook = sidecar.container.get("lifecycle", {}).get("preStop", {})
        if "exec" in hook:
            command = hook["exec"]["command"]
            assert PurePosixPath(command[0]).name == "sleep", f"{what}: preStop {command}"
            pre_stop_s = int(command[1])
        elif "sleep" in hook:
            pre_stop_s = int(hook["sleep"]["seconds"])
        grace_s = int(sidecar.pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE_PERIOD_S))
        assert grace_s * 1000 > pre_stop_s * 1000 + drain_ms, (
            f"{what}: terminationGracePeriodSeconds {grace_s} does not cover preStop "
            f"{pre_stop_s} s + --drain-timeout-ms {drain_ms}: the kubelet would SIGKILL mid-drain")


# --------------------------------------------------------------------------
# Example config files.


@pytest.mark.parametrize("path", CONFIG_EXAMPLES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_example_config_keys_and_values(path, config_keys):
    config = yaml.safe_load(path.read_text()) or {}
    assert_config_keys(config, config_keys, str(path.relative_to(SOURCE_DIR)))
    assert config.get("backend"), f"{path}: no backend"
    assert_remold_accepts(["--config", str(path)], str(path.relative_to(SOURCE_DIR)))


# --------------------------------------------------------------------------
# Dockerfile.


@dataclass
class Instruction:
    stage: int
    keyword: str
    text: str


def dockerfile_instructions() -> list[Instruction]:
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(stage, keyword, rest.strip()))
    return instructions


def dockerfile_one(keyword: str) -> Instruction:
    found = [i for i in dockerfile_instructions() if i.keyword == keyword]
    assert found, f"Dockerfile has no {keyword}"
    return found[-1]


def dockerfile_user() -> str:
    return dockerfile_one("USER").text


def apt_installs(stage: int) -> set[str]:
    packages: set[str] = set()
    for inst in dockerfile_instructions():
        if inst.stage != stage or inst.keyword != "RUN":
            continue
        for command in re.split(r"&&|;|\|\|", inst.text):
            words = command.split()
            if "apt-get" in words and "install" in words:
                after = words[words.index("install") + 1:]
                packages |= {w for w in after if not w.startswith("-")}
    return packages


def copy_sources(inst: Instruction) -> list[str]:
    words = inst.text.split()
    if inst.text.startswith("["):
        words = json.loads(inst.text)
    return [w for w in words[:-1] if not w.startswith("--")]


def copy_destination(inst: Instruction) -> str:
    return (json.loads(inst.text) if inst.text.startswith("[") else inst.text.split())[-1]


def cmake_dirs(directory: Path = SOURCE_DIR) -> list[Path]:
    """The directories the top-level CMake configure reads (add_subdirectory, recursively)."""
    text = (directory / "CMakeLists.txt").read_text()
    found = [directory]
    for sub in re.findall(r"^\s*add_subdirectory\(\s*([^\s)]+)", text, re.M):
        found += cmake_dirs(directory / sub)
    return found


def find_packages() -> set[str]:
    names = set()
    for directory in cmake_dirs():
        text = re.sub(r"#.*", "", (directory / "CMakeLists.txt").read_text())
        names |= set(re.findall(r"find_package\(\s*([A-Za-z0-9_.+-]+)", text))
        for args in re.findall(r"pkg_check_modules\(([^)]*)\)", text):
            names |= {w for w in args.split()[1:] if not w.isupper()}
    return names


def install_deps_packages() -> set[str]:
    text = (SOURCE_DIR / "scripts" / "install-deps.sh").read_text()
    match = re.search(r"APT_PACKAGES=\((.*?)\)", text, re.S)
    assert match, "scripts/install-deps.sh: no APT_PACKAGES=(...)"
    return {w for w in re.sub(r"#.*", "", match.group(1)).split()}


def test_dockerfile_stages():
    froms = [i for i in dockerfile_instructions() if i.keyword == "FROM"]
    assert len(froms) == 2, [f.text for f in froms]
    assert froms[0].text.split()[0] == "debian:12", froms[0].text
    assert froms[1].text.split()[0] == "debian:12-slim", froms[1].text
    user = dockerfile_user()
    assert re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", user), (
        f"USER {user}: use a numeric non-root uid (runAsNonRoot can only verify those)")
    assert json.loads(dockerfile_one("ENTRYPOINT").text) == ["remold", "serve"]


def test_dockerfile_flags_exist_and_are_accepted(serve_flags, tmp_path):
    cmd = json.loads(dockerfile_one("CMD").text)
    flags = flag_pairs(cmd, serve_flags, "Dockerfile CMD")
    args = list(cmd)
    if "--config" in flags:
        # The image expects a mounted file there; deploy/docker/remold.yaml is the example.
        assert PurePosixPath(flags["--config"]).name == "remold.yaml"
        args[args.index("--config") + 1] = str(DEPLOY / "docker" / "remold.yaml")
    assert_remold_accepts(args, "Dockerfile CMD")


def test_dockerfile_exposes_the_example_ports():
    exposed = {int(p.split("/")[0]) for i in dockerfile_instructions() if i.keyword == "EXPOSE"
               for p in i.text.split()}
    config = yaml.safe_load((DEPLOY / "docker" / "remold.yaml").read_text())
    assert port_of(config["listen"]) in exposed, (config["listen"], exposed)
    assert port_of(config["metrics_listen"]) in exposed, (config["metrics_listen"], exposed)
    assert host_of(config["listen"]) == "0.0.0.0", "in a container, listen on all interfaces"


def test_dockerfile_copies_what_the_build_reads():
    sources = []
    for inst in dockerfile_instructions():
        if inst.keyword in ("COPY", "ADD") and "--from=" not in inst.text:
            for source in copy_sources(inst):
                assert (SOURCE_DIR / source).exists(), f"Dockerfile COPY {source}: not in the repo"
                sources.append(PurePosixPath(source.rstrip("/") or "."))
    for directory in cmake_dirs():
        cmake_file = PurePosixPath((directory / "CMakeLists.txt").relative_to(SOURCE_DIR).as_posix())
        covered = any(s == PurePosixPath(".") or s == cmake_file or s in cmake_file.parents
                      for s in sources)
        assert covered, f"the build reads {cmake_file}; the Dockerfile does not COPY it"


def test_dockerignore_keeps_the_copied_sources():
    ignore = DEPLOY / "Dockerfile.dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for inst in dockerfile_instructions():
        if inst.keyword in ("COPY", "ADD") and "--from=" not in inst.text:
            for source in copy_sources(inst):
                path = PurePosixPath(source.rstrip("/"))
                for pattern in patterns:
                    hit = any(fnmatch.fnmatchcase(str(p), pattern.lstrip("/"))
                              for p in [path, *path.parents] if str(p) != ".")
                    assert not hit, f"{ignore.name}: {pattern!r} hides COPY source {source}"


def test_dockerfile_build_packages_cover_find_package():
    build = apt_installs(0)
    assert build, "the build stage installs nothing"
    unknown = sorted(n for n in find_packages() if n not in BUILD_PACKAGES)
    assert not unknown, f"find_package names missing from BUILD_PACKAGES here: {unknown}"
    needed = {BUILD_PACKAGES[n] for n in find_packages()} - {None}
    needed |= {"build-essential", "cmake", "ninja-build"}
    missing = sorted(needed - build)
    assert not missing, f"the Dockerfile's build stage lacks {missing}"
    # Same packages as the developers' machines: nothing test-only, nothing unknown.
    extra = sorted(build - install_deps_packages())
    assert not extra, f"build-stage packages not in scripts/install-deps.sh: {extra}"


def linked_packages(binary: Path) -> Optional[set[str]]:
    """Debian packages of the shared libraries ``binary`` loads (None: can't tell here)."""
    if not shutil.which("ldd") or not shutil.which("dpkg"):
        return None
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    assert ldd.returncode == 0, ldd.stderr
    assert "not found" not in ldd.stdout, ldd.stdout
    packages = set()
    for lib in re.findall(r"=>\s+(/\S+)", ldd.stdout):
        for candidate in (lib, str(Path(lib).resolve())):
            owner = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if owner.returncode == 0:
                packages.add(owner.stdout.split(":")[0].strip())
                break
        else:
            # /lib is /usr/lib on Debian 12 (merged /usr); dpkg knows one spelling.
            other = lib.replace("/usr/lib/", "/lib/") if lib.startswith("/usr/") else "/usr" + lib
            owner = subprocess.run(["dpkg", "-S", other], capture_output=True, text=True)
            if owner.returncode != 0:
                return None  # a library from outside Debian's packages: not this build
            packages.add(owner.stdout.split(":")[0].strip())
    return packages


def test_dockerfile_runtime_packages_are_the_linked_libraries():
    runtime = apt_installs(1)
    assert not [p for p in runtime if p.endswith("-dev")], f"-dev packages at run time: {runtime}"
    # remold and remold-reconcile (which `remold reconcile` runs; the only
    # one linking libmongoc) are both in the image.
    binary = require_binary()
    linked = linked_packages(binary)
    reconcile_linked = linked_packages(binary.parent / "remold-reconcile")
    if linked is not None and reconcile_linked is not None:
        linked |= reconcile_linked
    if linked is None or reconcile_linked is None:
        pytest.skip("ldd/dpkg cannot map the binary's libraries to Debian packages here")
    missing = sorted(linked - SLIM_BASE_PACKAGES - runtime)
    assert not missing, f"the binary links libraries of {missing}; the runtime stage lacks them"
    extra = sorted(runtime - linked)
    assert not extra, f"the runtime stage installs {extra}, which the binary does not link"


def docker_install_path() -> str:
    for inst in dockerfile_instructions():
        if inst.keyword == "COPY" and "--from=" in inst.text and DOCKER_BUILD_OUTPUT in inst.text:
            return copy_destination(inst)
    raise AssertionError(f"the Dockerfile does not COPY {DOCKER_BUILD_OUTPUT} from the build stage")


def test_dockerfile_binary_on_path():
    install = docker_install_path()
    assert PurePosixPath(install).name == "remold"
    # ENTRYPOINT ["remold", ...] finds it through debian's default PATH.
    assert str(PurePosixPath(install).parent) in ("/usr/local/bin", "/usr/bin", "/bin")


# --------------------------------------------------------------------------
# systemd.


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (a key may repeat), as systemd reads a unit."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    pending = ""
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line.startswith("["):
            assert line.endswith("]"), f"{path.name}:{number}: bad section header {line!r}"
            current = line[1:-1]
            assert current not in sections, f"{path.name}:{number}: section [{current}] twice"
            sections[current] = {}
            continue
        assert current is not None, f"{path.name}:{number}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key.strip()), (
            f"{path.name}:{number}: expected Key=value, got {line!r}")
        sections[current].setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(SYSTEMD_UNIT)


def exec_start(unit) -> list[str]:
    values = unit["Service"].get("ExecStart", [])
    assert len(values) == 1, f"expected one ExecStart, got {values}"
    return shlex.split(values[0])


def test_systemd_unit_sections(unit):
    assert {"Unit", "Service", "Install"} <= set(unit), sorted(unit)
    service = unit["Service"]
    assert service.get("Type") == ["exec"], "remold has no sd_notify: Type=exec"
    assert service.get("KillSignal", ["SIGTERM"]) == ["SIGTERM"]
    reload = service.get("ExecReload", [""])[0]
    assert "-HUP" in reload and "$MAINPID" in reload, f"ExecReload={reload}"
    assert unit["Install"].get("WantedBy"), "no WantedBy: `systemctl enable` would do nothing"
    assert service.get("User") or service.get("DynamicUser") == ["yes"], "runs as root"
    assert service.get("NoNewPrivileges") == ["yes"]
    assert service.get("ProtectSystem") == ["strict"]


def test_systemd_exec_start(unit, serve_flags):
    argv = exec_start(unit)
    assert argv[0] == docker_install_path(), (
        f"ExecStart runs {argv[0]}, the Dockerfile installs {docker_install_path()}")
    assert argv[1] == "serve", argv
    flags = flag_pairs(argv[2:], serve_flags, "remold.service ExecStart")
    assert flags.get("--config") == SYSTEMD_CONFIG_INSTALLED, flags
    args = list(argv[2:])
    args[args.index("--config") + 1] = str(SYSTEMD_CONFIG_SOURCE)
    assert_remold_accepts(args, "remold.service ExecStart")


def systemd_seconds(value: str) -> float:
    total = 0.0
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "": 1}
    for number, unit_name in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit_name]
    return total


def test_systemd_stop_timeout_covers_the_drain(unit):
    config = yaml.safe_load(SYSTEMD_CONFIG_SOURCE.read_text()) or {}
    drain_ms = int(config.get("drain_timeout_ms", DEFAULT_DRAIN_TIMEOUT_MS))
    flags = exec_start(unit)
    if "--drain-timeout-ms" in flags:
        drain_ms = int(flags[flags.index("--drain-timeout-ms") + 1])
    timeout = unit["Service"].get("TimeoutStopSec", ["90"])[0]
    assert systemd_seconds(timeout) * 1000 > drain_ms, (
        f"TimeoutStopSec={timeout} does not cover drain_timeout_ms {drain_ms}")


def test_systemd_analyze_verify(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-analyze here")
    # verify wants ExecStart's binary to exist: point it at the one under test.
    text = SYSTEMD_UNIT.read_text().replace(docker_install_path(), str(require_binary()))
    copy = tmp_path / "remold.service"
    copy.write_text(text)
    result = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                            text=True, timeout=60)
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if "remold.service" in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr


# --------------------------------------------------------------------------
# The README of deploy/.


def test_readme_indexes_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and path.name != "README.md":
            relative = path.relative_to(DEPLOY).as_posix()
            assert relative in readme, f"deploy/README.md does not mention {relative}"
    assert docker_install_path() in readme, "deploy/README.md does not say where remold is installed"
