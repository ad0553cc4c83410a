#!/usr/bin/env bash
# Throwaway certificates for the TLS tests and the demo: a CA, a server
# certificate for localhost, a client certificate, and an unrelated CA (for
# "wrong CA" tests). Never use these anywhere real.
#
# Usage:
#   certs.sh DIR [CLIENT_CN]   writes into DIR (created):
#     ca.crt ca.key                 the test CA
#     server.crt server.key         CN=localhost, SAN DNS:localhost only (so
#                                   verify-full to 127.0.0.1 fails by design)
#     client.crt client.key         CN=CLIENT_CN (default walrelay_cert), mode 0600
#     client-enc.key                the client key encrypted with the passphrase
#                                   in client-enc.pass
#     other-ca.crt                  a CA that signed nothing here
#     client.p12                    PKCS#12 keystore: client.key, client.crt and
#                                   ca.crt, password in client.p12.pass
#     truststore.p12                Java PKCS#12 truststore holding ca.crt as a
#                                   trusted entry, password in truststore.p12.pass
#                                   (needs keytool; skipped with a note without)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

(($# >= 1 && $# <= 2)) || {
    sed -n '6,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
command -v openssl >/dev/null 2>&1 || die "openssl not found: install the Debian package openssl"

dir=$1
cn=${2:-walrelay_cert}
mkdir -p "$dir"
cd "$dir"
umask 077

ossl() {
    openssl "$@" 2>>openssl.log || {
        cat openssl.log >&2
        die "openssl $1 failed in $dir"
    }
}

# EC P-256 keys: fast to generate; the certificates are signed with SHA-256,
# which is also what tls-server-end-point channel binding hashes with.
newkey() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

newkey ca.key
ossl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=walrelay test CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out ca.crt

newkey other-ca.key
ossl req -x509 -new -key other-ca.key -sha256 -days 3650 -subj "/CN=walrelay other CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out other-ca.crt

sign() {
    local name=$1 subject=$2 ext=$3
    newkey "$name.key"
    ossl req -new -key "$name.key" -subj "$subject" -out "$name.csr"
    printf '%s\n' "$ext" >"$name.ext"
    ossl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 \
        -days 3650 -extfile "$name.ext" -out "$name.crt"
    rm -f "$name.csr" "$name.ext"
}

sign server "/CN=localhost" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost"

sign client "/CN=$cn" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

printf 'walrelay-key-passphrase\n' >client-enc.pass
ossl pkcs8 -topk8 -in client.key -passout file:client-enc.pass -v2 aes-256-cbc -out client-enc.key

# AES-256 and PBKDF2 (OpenSSL 3's default, spelled out for older ones):
# Java 17 and librdkafka both read it.
printf 'walrelay-p12-password\n' >client.p12.pass
ossl pkcs12 -export -inkey client.key -in client.crt -certfile ca.crt -name client \
    -keypbe AES-256-CBC -certpbe AES-256-CBC -macalg sha256 \
    -passout file:client.p12.pass -out client.p12

# Only keytool writes the trusted-certificate attribute that makes Java
# treat a PKCS#12 entry as a trust anchor; openssl's output would be empty
# to Java.
rm -f truststore.p12 truststore.p12.pass
if command -v keytool >/dev/null 2>&1; then
    printf 'walrelay-truststore-password\n' >truststore.p12.pass
    keytool -importcert -noprompt -storetype PKCS12 -alias walrelay-test-ca -file ca.crt \
        -keystore truststore.p12 -storepass:file truststore.p12.pass >>openssl.log 2>&1 || {
        cat openssl.log >&2
        die "keytool -importcert failed in $dir"
    }
    chmod 0600 truststore.p12 truststore.p12.pass
else
    note "keytool not found: truststore.p12 not written (install a Java runtime for it)"
fi

chmod 0644 ca.crt other-ca.crt server.crt client.crt
chmod 0600 ca.key other-ca.key server.key client.key client-enc.key client-enc.pass \
    client.p12 client.p12.pass
rm -f openssl.log ca.srl
