# One image for the operator (`topolabel run`), the fabric agent (`topolabel agent` beside lldpd) and
# InfiniBand discovery (`ibnetdiscover`). Building, pushing and pointing the manifests or the chart at it:
# docs/operator.md, "The image".
#
#   buildah bud --build-arg VERSION=0.1.0 -t topolabel:0.1.0 .        (or docker build; any OCI builder)
#
# BASE is a Debian 12 image with Python 3.11 from Debian. CI makes one locally with debootstrap and gives it
# the default name (hack/image.py), since no registry is reachable there.
ARG BASE=debian:bookworm-slim

# build: a virtualenv holding topolabel and its dependencies, pinned by .ci/constraints.txt. pip and
# setuptools are removed from it, and so is kubernetes.aio (an asyncio copy of the Kubernetes client, 68 MB,
# that nothing imports); this stage is left behind. Optional build secrets reach pip only: `pip.conf` (at
# /etc/pip.conf) and the files it names, such as a CA bundle (`pip-cert`, at /run/secrets/pip-cert).
FROM ${BASE} AS build
# EXTRAS: optional cloud SDKs by extra name, e.g. `--build-arg EXTRAS=oci,nebius` for the oci and nebius sources
# (the oci SDK adds about 500 MB; docs/oci.md).
ARG EXTRAS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf \
    --mount=type=secret,id=pip-cert \
    --mount=type=secret,id=pip-client-cert \
    --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/topolabel \
 && /opt/topolabel/bin/pip install --constraint .ci/constraints.txt ".${EXTRAS:+[$EXTRAS]}" \
 && /opt/topolabel/bin/pip uninstall --yes pip setuptools \
 && rm -rf /opt/topolabel/lib/python3.11/site-packages/kubernetes/aio \
 && find /opt/topolabel -depth -type d -name tests -path '*/site-packages/*/tests' -exec rm -rf {} +

# runtime: Debian's python3, lldpd/lldpcli (the agent DaemonSet's lldpd container) and infiniband-diags
# (ibnetdiscover), the virtualenv, and a non-root user. Nothing here writes to the root filesystem at run
# time, so it runs with readOnlyRootFilesystem (the manifests mount an emptyDir at /tmp for the client).
FROM ${BASE}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/topolabel/topolabel
LABEL org.opencontainers.image.title="topolabel" \
      org.opencontainers.image.description="Discover GPU cluster network topology, label Kubernetes nodes and generate Kueue TAS objects" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
        'path-exclude=/usr/share/lintian/*' > /etc/dpkg/dpkg.cfg.d/topolabel-slim \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 lldpd infiniband-diags \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 65532 topolabel \
 && useradd --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin topolabel
COPY --from=build /opt/topolabel /opt/topolabel
ENV PATH=/opt/topolabel/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["topolabel"]
CMD ["--help"]
