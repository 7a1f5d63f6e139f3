#!/usr/bin/env bash
# Installs the system packages the project builds against, only when something is missing:
# libxml2 and libcurl headers for ovirt-engine-sdk-python (its C extension and pycurl), gcc, Python venv,
# a JDK and Maven for the simulator's Java SDK client.
# Go is expected on PATH for the control-plane build (the machine image ships it).
set -euo pipefail
need=()
have_header() { [ -e "$1" ]; }
have_header /usr/include/libxml2/libxml/parser.h || need+=(libxml2-dev)
have_header /usr/include/x86_64-linux-gnu/curl/curl.h || have_header /usr/include/curl/curl.h || need+=(libcurl4-openssl-dev)
have_header /usr/include/openssl/ssl.h || need+=(libssl-dev)
command -v gcc >/dev/null || need+=(gcc)
command -v pkg-config >/dev/null || need+=(pkg-config)
# The storage driver formats ext4 and xfs; its tests run both on a loop device (test/unit/storage).
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
# The Java SDK client of the simulator (hack/javaclient): a JDK 17+ and Maven.
command -v javac >/dev/null || need+=(default-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
# The test bed's real nodes (hack/controlplane/nodes.py): kubelet runs pods through containerd and runc,
# networked by the CNI bridge and host-local plugins.
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
# The images the real nodes run (hack/images, docs/images.md): buildah builds them without a Docker engine, and
# debootstrap makes the Debian bookworm root file system of the stand-in base image.
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
# The pause program is linked static (hack/images/pause.py): glibc's static library, which gcc only recommends.
{ command -v gcc >/dev/null && [ "$(gcc -print-file-name=libc.a)" != libc.a ]; } || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing system packages: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
command -v go >/dev/null || { echo "error: Go is required to build the local control plane (https://go.dev/dl)" >&2; exit 1; }
