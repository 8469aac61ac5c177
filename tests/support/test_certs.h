// Certificates for TLS tests, made by openssl in a temporary directory.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace delayq::testing {

// A CA and certificates it signed (openssl), for TLS tests: "server" for 127.0.0.1, "named" for
// the DNS name delayq.test only (a client must be told the name), "client" for a client. Lives as
// long as the object. Keys are ECDSA P-256: an RSA 2048 key took openssl ~0.4 s to make, and the
// four of them ~1.5 s of every test process that made certificates (the HTTPS conformance run
// spent most of its time there).
class TestCerts {
 public:
  TestCerts() {
    Run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=delayq-test-ca", "-keyout", ca_key(), "-out", ca()});
    std::ofstream(dir_.Sub("server.ext")) << "subjectAltName=IP:127.0.0.1\n";
    std::ofstream(dir_.Sub("named.ext")) << "subjectAltName=DNS:delayq.test\n";
    Sign("server", "/CN=127.0.0.1", true);
    Sign("named", "/CN=delayq.test", true);
    Sign("client", "/CN=delayq-client", false);
  }
  std::string ca() const { return dir_.Sub("ca.pem"); }
  std::string ca_key() const { return dir_.Sub("ca.key"); }
  std::string cert(const std::string& who) const { return dir_.Sub(who + ".pem"); }
  std::string key(const std::string& who) const { return dir_.Sub(who + ".key"); }
  // redis-server's TLS options: this server certificate, client certificates checked when asked.
  std::vector<std::string> RedisArgs(bool want_client_certs) const {
    return {"--tls-cert-file",    cert("server"), "--tls-key-file",     key("server"),
            "--tls-ca-cert-file", ca(),           "--tls-auth-clients", want_client_certs ? "yes" : "no"};
  }

 private:
  void Run(const std::vector<std::string>& args) {
    RunResult r = RunProcess(args);
    if (r.exit_code != 0) throw std::runtime_error("openssl failed: " + r.err);
  }
  void Sign(const std::string& who, const std::string& subject, bool san) {
    Run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
         "-keyout", key(who), "-out", dir_.Sub(who + ".csr")});
    std::vector<std::string> x509 = {"openssl", "x509", "-req",   "-in",    dir_.Sub(who + ".csr"),
                                     "-CA",     ca(),   "-CAkey", ca_key(), "-CAcreateserial",
                                     "-days",   "2",    "-out",   cert(who)};
    if (san) x509.insert(x509.end(), {"-extfile", dir_.Sub(who + ".ext")});
    Run(x509);
  }
  TempDir dir_;
};

}  // namespace delayq::testing
