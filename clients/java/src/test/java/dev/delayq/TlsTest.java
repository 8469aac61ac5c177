package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Mutual TLS, answers far over 16 KB (TLS records), and TLS options that cannot work. */
class TlsTest {
  static Path dir;

  static void openssl(String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of("openssl"));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    if (p.waitFor() != 0) throw new AssertionError("openssl " + cmd + ": " + out);
  }

  static String f(String name) {
    return dir.resolve(name).toString();
  }

  static void sign(String who, String subject, String san) throws Exception {
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f(who + ".key"), "-out", f(who + ".csr"));
    List<String> args = new ArrayList<>(List.of("x509", "-req", "-in", f(who + ".csr"), "-CA", f("ca.pem"), "-CAkey", f("ca.key"),
        "-CAcreateserial", "-days", "2", "-out", f(who + ".pem")));
    if (san != null) {
      Files.writeString(dir.resolve(who + ".ext"), san + "\n");
      args.addAll(List.of("-extfile", f(who + ".ext")));
    }
    openssl(args.toArray(new String[0]));
  }

  @BeforeAll
  static void certificates() throws Exception {
    dir = Files.createTempDirectory("delayq-java-tls-");
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=delayq-test-ca", "-keyout", f("ca.key"), "-out", f("ca.pem"));
    sign("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1");
    sign("client", "/CN=delayq-client", null);
  }

  @AfterAll
  static void removeThem() throws Exception {
    try (var files = Files.walk(dir)) {
      files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  @Test
  void mutualTlsLetsInOnlyASignedClientAndBigAnswersArriveWhole() throws Exception {
    try (Server s = new Server("--tls-cert", f("server.pem"), "--tls-key", f("server.key"), "--tls-client-ca", f("ca.pem"))) {
      assertTrue(s.url.startsWith("https://"), s.url);
      Client c = Client.builder(s.url).caFile(Path.of(f("ca.pem"))).clientCert(Path.of(f("client.pem")), Path.of(f("client.key"))).build();
      String big = "é".repeat(100_000);
      for (int i = 0; i < 5; i++) c.enqueue("tls", NewJob.of(big));
      List<Job> jobs = c.reserve("tls", 5, null, null);
      assertEquals(5, jobs.size());
      for (Job j : jobs) assertEquals(big, j.payload());
      Client anonymous = Client.builder(s.url).caFile(Path.of(f("ca.pem"))).build();
      assertThrows(DelayqException.Unavailable.class, () -> anonymous.stats("tls"));
      Client untrusting = Client.builder(s.url).clientCert(Path.of(f("client.pem")), Path.of(f("client.key"))).build();
      DelayqException e = assertThrows(DelayqException.Unavailable.class, () -> untrusting.stats("tls"));
      assertTrue(e.getMessage().contains("TLS"), e.getMessage());
    }
  }

  @Test
  void tlsOptionsThatCannotWorkAreRefusedByBuild() {
    String url = "https://127.0.0.1:1";
    assertThrows(DelayqException.InvalidArgument.class, () -> Client.builder(url).clientCert(null, Path.of(f("client.key"))).build());
    assertThrows(DelayqException.InvalidArgument.class, () -> Client.builder(url).clientCert(Path.of(f("client.pem")), Path.of(f("ca.pem"))).build());
    assertThrows(DelayqException.InvalidArgument.class, () -> Client.builder(url).caFile(Path.of(f("client.csr"))).build());
  }
}
