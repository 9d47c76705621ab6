"""The Helm chart (deploy/helm/vocalis) and the Containerfile, checked as far as this machine allows.

No cluster, and no helm binary from any registry reachable here: the chart is rendered with tests/deploy/helm_subset.py
(which refuses any template construct it does not implement), every object is validated against the Kubernetes
OpenAPI schemas (kubernetes-validate, strict: unknown fields fail), and what the chart says is checked against the code
it deploys: the flags exist on `vocalis serve`, the probe paths are gateway routes, the HPA's metric is one the
server exports, the grace period covers --drain-grace. The Containerfile is linted with hadolint.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.deploy.helm_subset import UnsupportedTemplate, parse, render_chart
from vocalis.gateway.app import create_app
from vocalis.server.cli import serve

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "vocalis"
KUBERNETES = "1.30"
EVERYTHING = {
    "model": "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
    "servedModelName": "qwen3-tts",
    "extraArgs": ["--max-queued-requests", "32"],
    "drainGrace": 45,
    "modelCache": {"enabled": True},
    "voiceStore": {"url": "postgresql://vocalis:secret@postgres:5432/vocalis"},
    "apiKeys": {"keys": ["key-one", "key-two"]},
    "gpu": {"enabled": True, "count": 2},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "autoscaling": {"enabled": True},
    "nodeSelector": {"accelerator": "h100"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def by_kind(documents: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for document in documents:
        kinds.setdefault(document["kind"], []).append(document)
    return kinds


def validate(documents: list[dict]) -> None:
    for document in documents:
        body = {k: v for k, v in document.items() if k != "__template__"}
        if body["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no schema in Kubernetes' own OpenAPI; its fields are checked below
        kubernetes_validate.validate(body, KUBERNETES, strict=True)


def container(documents: list[dict]) -> dict:
    (deployment,) = by_kind(documents)["Deployment"]
    (main,) = deployment["spec"]["template"]["spec"]["containers"]
    return main


def serve_flags() -> set[str]:
    return {opt for param in serve.params for opt in param.opts if opt.startswith("--")}


def test_defaults_render_valid_objects():
    documents = render_chart(CHART)
    validate(documents)
    # No claim by default: a ReadWriteMany claim would keep the pods Pending on a cluster without an RWX class.
    assert sorted(by_kind(documents)) == ["Deployment", "PodDisruptionBudget", "Service"]
    (deployment,) = by_kind(documents)["Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    main = container(documents)
    args = main["args"]
    # Leaving: preStop sleep 5, then SIGTERM: drain delay 4 (HAProxy's fall x (inter + timeout)), drain grace 30.
    assert main["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert args[args.index("--drain-delay") + 1] == "4" and args[args.index("--drain-grace") + 1] == "30"
    assert spec["terminationGracePeriodSeconds"] == 5 + 4 + 30 + 10
    assert "--voice-store" not in args and "--api-key-file" not in args
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["cache"] == {"name": "cache", "emptyDir": {"sizeLimit": "20Gi"}}
    # Without a voice store, each pod keeps its uploads in its own emptyDir, as values.yaml says.
    assert args[args.index("--voice-dir") + 1] == "/voices" and "emptyDir" in volumes["voices"]
    assert {m["mountPath"] for m in main["volumeMounts"]} == {"/cache", "/voices"}
    (pdb,) = by_kind(documents)["PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_everything_on_renders_valid_objects():
    documents = render_chart(CHART, EVERYTHING)
    validate(documents)
    kinds = by_kind(documents)
    assert sorted(kinds) == [
        "Deployment", "HorizontalPodAutoscaler", "PersistentVolumeClaim", "PodDisruptionBudget", "Secret", "Service", "ServiceMonitor",
    ]
    (deployment,) = kinds["Deployment"]
    assert "replicas" not in deployment["spec"]  # the HPA owns the count
    spec = deployment["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 5 + 4 + 45 + 10
    (claim,) = kinds["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # enabled: one claim mounted by pods on several nodes
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    main = container(documents)
    args = main["args"]
    assert args[:2] == ["serve", EVERYTHING["model"]] and args[-2:] == ["--max-queued-requests", "32"]
    assert args[args.index("--drain-grace") + 1] == "45"
    assert main["resources"]["limits"] == {"memory": "8Gi", "nvidia.com/gpu": 2}
    assert "--voice-dir" not in args and "voices" not in {v["name"] for v in spec["volumes"]}

    (secret,) = kinds["Secret"]
    assert secret["stringData"] == {"url": EVERYTHING["voiceStore"]["url"], "keys": "key-one\nkey-two"}
    assert args[args.index("--voice-store") + 1] == "$(VOCALIS_VOICE_STORE)"  # expanded by the kubelet from the env
    (store_env,) = [e for e in main["env"] if e["name"] == "VOCALIS_VOICE_STORE"]
    assert store_env["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "url"}
    key_file = Path(args[args.index("--api-key-file") + 1])
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == "keys"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "keys"]
    assert key_file.parent == Path(mount["mountPath"]) and volume["secret"]["items"] == [{"key": "keys", "path": key_file.name}]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]

    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (hpa,) = kinds["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


def test_existing_secrets_are_used_and_none_is_created():
    documents = render_chart(CHART, {"voiceStore": {"existingSecret": "pg"}, "apiKeys": {"existingSecret": "keys", "secretKey": "k"}})
    validate(documents)
    assert "Secret" not in by_kind(documents)
    main = container(documents)
    (store_env,) = [e for e in main["env"] if e["name"] == "VOCALIS_VOICE_STORE"]
    assert store_env["valueFrom"]["secretKeyRef"] == {"name": "pg", "key": "url"}


def test_the_chart_speaks_to_what_it_deploys():
    documents = render_chart(CHART, EVERYTHING)
    main = container(documents)
    flags = {arg for arg in main["args"] if arg.startswith("--")}
    assert flags <= serve_flags(), flags - serve_flags()
    routes = set(create_app("127.0.0.1:1").openapi()["paths"])
    probes = {main[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")}
    assert probes == {"/startup", "/ready", "/live"} and probes <= routes
    assert {p["name"]: p["containerPort"] for p in main["ports"]} == {"grpc": 50051, "http": 8091}
    metric = by_kind(documents)["HorizontalPodAutoscaler"][0]["spec"]["metrics"][0]["pods"]["metric"]["name"]
    assert f'"{metric}"' in (ROOT / "server" / "metrics.py").read_text()
    exposed = re.search(r"^EXPOSE (.+)$", (ROOT / "Containerfile").read_text(), re.M)
    assert exposed is not None and exposed.group(1).split() == ["50051", "8091"]


def test_the_renderer_refuses_what_it_does_not_know():
    with pytest.raises(UnsupportedTemplate):
        parse("{{ range .Values.x }}{{ . }}{{ end }}")
    with pytest.raises(UnsupportedTemplate):
        parse("{{ if .Values.x }}open")
    with pytest.raises(UnsupportedTemplate):
        render_chart_with("{{ lookup \"v1\" \"Secret\" \"ns\" \"name\" }}")


def render_chart_with(template: str) -> None:
    from tests.deploy.helm_subset import Renderer

    renderer = Renderer(CHART, yaml.safe_load((CHART / "values.yaml").read_text()))
    renderer.templates = {"probe.yaml": parse(template)}
    renderer.render()


def test_containerfile_passes_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), "--no-color", str(ROOT / "Containerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
