package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The README's way: examples/OrderTimeout.java run from source against the jar and a real server. */
class ExampleTest {
  @Test
  void theOrderTimeoutExampleRunsAsWritten() throws Exception {
    try (Server s = new Server()) {
      String jar = System.getenv("DELAYQ_CLIENT_JAR");
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      Process p = new ProcessBuilder(java, "-cp", jar, "examples/OrderTimeout.java", s.url).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      assertEquals(0, p.waitFor(), out);
      for (String want : List.of("duplicate: true", "order 42: completed {", "\"cancelled\":42", "dead: order-bad IllegalArgumentException: order id not-a-number is not a number",
          "replayed 1 then completed", "done: acked 2 nacked 2")) {
        assertTrue(out.contains(want), "the example printed no " + want + ":\n" + out);
      }
    }
  }
}
