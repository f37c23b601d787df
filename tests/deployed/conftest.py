"""template.yaml as deployed: built by `sam build` (the layer for this machine's architecture: the
emulator runs the functions under its own x86_64 interpreter), deployed by `sam deploy` into MiniStack
(tools/ministack, started by ``launch.py`` on loopback) with the parameters a user passes, its secrets
naming a FerretDB store (on PostgreSQL) and a Redis lock started for this module alone. The tests then
talk to the deployed stack only: its API Gateway endpoint, its queues, its bus.

The stack's ``rate(1 minute)`` tick rule is sped up twelve-fold (``MS_RATE_DIVISOR``): each tick's loop
still runs a minute, so loops overlap and the tick's lease decides, as it does when a tick runs late.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.support import servers
from tests.support.fixtures import a_redis, ferretdb_on_postgresql

REPO = Path(__file__).resolve().parents[2]
SAM = REPO / ".cache" / "sam-venv" / "bin" / "sam"
REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
# what a user would give `sam deploy`: a runner timeout of a minute, a shorter redrive
PARAMETERS = {"RunnerTimeout": "60", "QueueVisibilityTimeout": "900", "MaxReceiveCount": "3", "BatchSize": "10"}


@dataclass
class Stack:
    endpoint: str
    outputs: dict[str, str]
    workdir: Path
    api_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.api_id = self.outputs["ApiUrl"].split("//", 1)[1].split(".", 1)[0]

    @property
    def api(self) -> str:
        """The API stage's URL on the emulator (what ApiUrl names on AWS)."""
        return f"{self.endpoint}/_aws/execute-api/{self.api_id}/v1"

    def client(self, service: str, config: Config | None = None) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, config=config, **CREDENTIALS)

    def log(self) -> str:
        return (self.workdir / "ministack.log").read_text(errors="replace")


def _build(workdir: Path) -> Path:
    assert SAM.exists(), "the SAM CLI is installed by scripts/sam-check.sh (make sam-check)"
    build = workdir / "build"
    # the layer's wheels for this machine (the emulator runs the functions under its own interpreter)
    arch = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine()]
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "LAMBDA_ARCH": arch, "PYTHON": str(SAM.parent / "python")}
    done = subprocess.run(
        [str(SAM), "build", "--template", str(REPO / "template.yaml"), "--build-dir", str(build),
         "--no-use-container", "--no-cached"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return build / "template.yaml"


def _deploy(endpoint: str, template: Path, workdir: Path) -> None:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": REGION,
           "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "HOME": str(workdir)}  # fmt: skip
    overrides = [f"{k}={v}" for k, v in PARAMETERS.items()]
    done = subprocess.run(
        [str(SAM), "deploy", "--template-file", str(template), "--stack-name", "ticklock", "--resolve-s3",
         "--capabilities", "CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND", "--no-confirm-changeset",
         "--parameter-overrides", *overrides],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def ferretdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The deployed stack's store, of its own: FerretDB on PostgreSQL (its URI, and the PostgreSQL URL
    behind it, where the poison test puts its trigger). On FerretDB's SQLite backend, the suite's or one of
    its own, the burst of thirty runner environments stalled the store for minutes in two CI runs of
    2026-12-02 and 03 (runs stuck, reads timing out, the next test's store "not answering"): that backend
    serialises its writers (README, "Testing against FerretDB")."""
    yield from ferretdb_on_postgresql(tmp_path_factory, "ferretdb-deployed")


@pytest.fixture(scope="module")
def ferretdb_uri(ferretdb: tuple[str, str]) -> str:
    return ferretdb[0]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    """The deployed stack's Redis, of its own: the stack's tick, killed with the emulator, leaves its lease
    (``ticklock:tick``) for its TTL, and in the suite's Redis that stopped the Lambda emulation's first tick
    when that test ran right after these."""
    yield from a_redis(tmp_path_factory, "redis-deployed")


@pytest.fixture(scope="module")
def redis_url(redis_server: servers.Server) -> str:
    return str(redis_server.url)  # type: ignore[attr-defined]


# module-scoped: the stack (its tick rule firing every 5 s, its function workers) is torn down as soon as
# its tests are done, so that it takes no CPU from the timing-sensitive suites after it
@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, ferretdb_uri: str) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("deployed")
    template = _build(workdir)
    # its log is workdir/ministack.log; its functions' unpacked code (~120 MB a deploy) goes under
    # workdir/tmp, removed at stop with its function workers (its process group)
    emulator, endpoint = servers.start_ministack(workdir, MS_RATE_DIVISOR="12", MS_SCHED_TICK="1")
    try:
        client = boto3.client("secretsmanager", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
        client.create_secret(Name="ticklock/store-uri", SecretString=f"{ferretdb_uri}deployed")
        client.create_secret(Name="ticklock/redis-url", SecretString=redis_url)
        _deploy(endpoint, template, workdir)
        cfn = boto3.client("cloudformation", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
        described = cfn.describe_stacks(StackName="ticklock")["Stacks"][0]
        assert described["StackStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), json.dumps(described, default=str)
        yield Stack(endpoint, {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}, workdir)
    finally:
        emulator.stop()
