# planbus: one image holding every binary (planner, dispatcher, toolworker,
# nats-server), FROM scratch, so building it pulls nothing.
#
# The build context is dist/image, which scripts/build-images fills with
# static binaries built on the host (CGO_ENABLED=0), the examples (plans,
# requests, HTN domains), the NATS configs of deploy/nats and empty /tmp and
# /data directories:
#
#   scripts/build-images          # or, by hand, after staging dist/image:
#   docker build -f Dockerfile -t planbus:dev dist/image
#
# compose.yaml picks the binary of each service with `entrypoint:`.
#
# There are no CA certificates in the image: NATS on the compose network is
# plain TCP. For TLS to NATS pass --tls-ca (NATS_CA) with a mounted PEM file;
# for the http skill to reach https:// URLs mount a bundle at
# /etc/ssl/certs/ca-certificates.crt (or set SSL_CERT_FILE). See
# docs/deploy.md.
FROM scratch

COPY bin/ /bin/
COPY examples/ /examples/
COPY nats/ /etc/nats/
# /tmp (mode 1777: `planner run` without --nats-url keeps its private store
# there) and /data (mode 0700: the JetStream store of nats-server, and of
# `planner serve`, on a volume) belong to the runtime user. Copying rootfs/
# whole keeps the directories' modes.
COPY --chown=65532:65532 rootfs/ /

ENV PATH=/bin \
    HOME=/tmp \
    XDG_STATE_HOME=/data

USER 65532:65532
WORKDIR /tmp

ENTRYPOINT ["/bin/planner"]
CMD ["help"]
