#!/bin/sh
# The compose `kafka-acls` job: admin client properties, then the generated users and
# ACLs (acls.sh, from shared/coachbus/acl.py). Idempotent: safe on every `up`.
set -eu
COMMAND_CONFIG=/tmp/admin.properties
export COMMAND_CONFIG
sh /coachbus/admin-client.sh "$COMMAND_CONFIG"
exec sh /coachbus/acls.sh
