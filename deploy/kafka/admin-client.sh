#!/bin/sh
# Writes the admin's client properties (SASL/PLAIN over the compose network) to $1:
# used by the broker's healthcheck and by the users/ACL job. The password comes from
# KAFKA_ADMIN_PASSWORD and never lands in the compose file.
set -eu
: "${KAFKA_ADMIN_PASSWORD:?KAFKA_ADMIN_PASSWORD is not set}"
umask 077
cat > "$1" <<PROPS
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="${KAFKA_ADMIN_PASSWORD}";
PROPS
