package dev.delayq;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/** A real `delayq serve` for a test, on a free loopback port, in a temporary data directory. */
final class Server implements AutoCloseable {
  private static final Pattern SERVING = Pattern.compile("delayq serving (https?)://127\\.0\\.0\\.1:(\\d+)");
  final Path dir;
  private final List<String> extra;
  private Process process;
  int port;
  String url;
  final StringBuffer log = new StringBuffer();

  Server(String... extra) throws IOException {
    this.dir = Files.createTempDirectory("delayq-java-");
    this.extra = List.of(extra);
    start();
  }

  static String binary() {
    String b = System.getenv("DELAYQ_BIN");
    return b != null ? b : "../../build/delayq";
  }

  void start() throws IOException {
    List<String> args = new ArrayList<>(List.of(binary(), "serve", "--listen", "127.0.0.1:" + port, "--data", dir.resolve("data").toString()));
    args.addAll(extra);
    process = new ProcessBuilder(args).redirectErrorStream(true).start();
    CompletableFuture<Matcher> found = new CompletableFuture<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream()))) {
        for (String line; (line = lines.readLine()) != null; ) {
          log.append(line).append('\n');
          Matcher m = SERVING.matcher(line);
          if (m.find()) found.complete(m);
        }
      } catch (IOException ended) {
        // the server is gone
      }
      found.completeExceptionally(new IllegalStateException("delayq serve exited: " + log));
    });
    reader.setDaemon(true);
    reader.start();
    try {
      Matcher m = found.get(30, TimeUnit.SECONDS); // a guard against a hang, not a synchronisation
      port = Integer.parseInt(m.group(2));
      url = m.group(1) + "://127.0.0.1:" + port;
    } catch (Exception e) {
      process.destroyForcibly();
      throw new IllegalStateException("delayq serve did not start: " + log, e);
    }
  }

  /** kill -9; start() again serves on the same port and data. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor();
  }

  /** kill -STOP / -CONT: a server that hangs (swapping, a network dropping packets), and one going on. */
  void hang(boolean hung) throws Exception {
    Process signal = new ProcessBuilder("kill", hung ? "-STOP" : "-CONT", Long.toString(process.pid())).start();
    if (signal.waitFor() != 0) throw new IllegalStateException("kill could not signal the server");
  }

  @Override
  public void close() throws IOException {
    try {
      hang(false); // a stopped server takes no SIGTERM
    } catch (Exception ignored) {
      // gone already
    }
    process.destroy();
    try {
      process.waitFor(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
