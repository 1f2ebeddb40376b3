#!/usr/bin/env bash
# Makes the certificates the TLS suites use, in directory $1 (openssl):
#   ca.pem             the CA the server certificates chain to
#   server.pem/.key    127.0.0.1 and localhost, signed by ca
#   ca2.pem            another CA;  server2.pem/.key signed by it (reload)
#   clientca.pem       the CA --tls-client-ca names
#   client.pem/.key    signed by clientca;  rogue.pem/.key by ca2
#   TLS to Redis (test_redis_tls):
#   other.pem/.key     signed by ca, for other.example only (a wrong host name)
#   expired.pem/.key   signed by ca, for 127.0.0.1, valid only in January 2020
#   rclient.pem/.key   a client certificate signed by ca (Redis trusts ca.pem)
set -euo pipefail
cd "$1"
subj() { echo "/CN=$1"; }
ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "$(subj "$1")" \
        -keyout "$1.key" -out "$1.pem" 2>/dev/null
}
leaf() { # name ca san
    openssl req -newkey rsa:2048 -nodes -subj "$(subj "$1")" -keyout "$1.key" -out "$1.csr" \
        2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
ca ca
ca ca2
ca clientca
leaf server ca "IP:127.0.0.1,DNS:localhost"
leaf server2 ca2 "IP:127.0.0.1,DNS:localhost"
leaf client clientca "DNS:client"
leaf rogue ca2 "DNS:rogue"
leaf other ca "DNS:other.example"
leaf rclient ca "DNS:lockgate-client"
# An expired certificate without faking the clock: `openssl ca` takes
# explicit dates (`openssl x509 -req` only takes -days).
openssl req -newkey rsa:2048 -nodes -subj "$(subj expired)" -keyout expired.key \
    -out expired.csr 2>/dev/null
: > index.txt
cat > expired.cnf <<'CNF'
[ca]
default_ca = exp
[exp]
database = index.txt
new_certs_dir = .
serial = expired.srl
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ext
[any]
commonName = supplied
[ext]
subjectAltName = IP:127.0.0.1,DNS:localhost
extendedKeyUsage = serverAuth,clientAuth
CNF
echo 01 > expired.srl
openssl ca -batch -notext -config expired.cnf -cert ca.pem -keyfile ca.key \
    -startdate 20200101000000Z -enddate 20200102000000Z -in expired.csr -out expired.pem \
    2>/dev/null
