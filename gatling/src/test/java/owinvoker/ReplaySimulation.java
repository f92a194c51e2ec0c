package owinvoker;

import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Session;
import io.gatling.javaapi.core.Simulation;
import io.gatling.javaapi.http.HttpProtocolBuilder;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Open-loop replay of an ow-invoker scenario file (JSON Lines, one call per line:
 * {"seq": 0, "t": 1.25, "action": "sebs-110-dynamic-html", "params": {...}}).
 *
 * <p>Every call becomes one virtual user. All users are injected at the start and each one
 * pauses until its own scheduled time, then sends one blocking invoke; no user ever waits for
 * another's reply, so slow responses never delay later sends. Each request's scheduled, sent and
 * done times (seconds from the common start), HTTP status and activation id go to a CSV with the
 * same columns as the Python replayer (gatling/replay.py).
 *
 * <p>System properties: scenario (required), out (timings.csv), apihost (http://127.0.0.1:3233),
 * auth (uuid:key, the stock guest key by default), namespace (_), invoke (rest|web),
 * blocking (true), result (false: the reply then carries the whole activation record).
 */
public class ReplaySimulation extends Simulation {

  private static final String GUEST_AUTH =
      "23bc46b1-71f6-4ed5-8c54-816aa4f8c502:"
          + "123zO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String apihost = prop("apihost", "http://127.0.0.1:3233").replaceAll("/+$", "");
  private final String namespace = prop("namespace", "_");
  private final String invoke = prop("invoke", "rest");
  private final boolean blocking = Boolean.parseBoolean(prop("blocking", "true"));
  private final boolean result = Boolean.parseBoolean(prop("result", "false"));
  private final String[] auth = prop("auth", GUEST_AUTH).split(":", 2);
  private final List<Map<String, Object>> calls = readScenario(Path.of(required("scenario")));
  private final TimingLog log = new TimingLog(Path.of(prop("out", "timings.csv")));
  private final AtomicLong startNanos = new AtomicLong(0);
  private volatile double startEpochS;

  {
    HttpProtocolBuilder protocol =
        http.baseUrl(apihost)
            .disableWarmUp()
            .disableCaching()
            .acceptHeader("application/json")
            .contentTypeHeader("application/json");

    ScenarioBuilder replay =
        scenario("replay")
            .feed(listFeeder(calls))
            .exec(session -> session.set("start", start()))
            .pause(this::untilScheduled)
            .exec(session -> session.set("sentNs", System.nanoTime()))
            .exec(
                http("invoke")
                    .post(this::path)
                    .basicAuth(auth[0], auth.length > 1 ? auth[1] : "")
                    .body(StringBody(session -> session.getString("params")))
                    .check(
                        status().saveAs("status"),
                        header("x-openwhisk-activation-id").optional().saveAs("aidHeader"),
                        bodyString().saveAs("body")))
            .exec(this::record);

    setUp(replay.injectOpen(atOnceUsers(calls.size()))).protocols(protocol);
  }

  @Override
  public void after() {
    log.close();
    System.out.println(log.latenessSummary());
  }

  private long start() {
    long now = System.nanoTime();
    if (startNanos.compareAndSet(0, now)) {
      startEpochS = System.currentTimeMillis() / 1e3;
    }
    return startNanos.get();
  }

  private Duration untilScheduled(Session session) {
    long due = startNanos.get() + Math.round(session.getDouble("t") * 1e9);
    return Duration.ofNanos(Math.max(0, due - System.nanoTime()));
  }

  private String path(Session session) {
    String action = URLEncoder.encode(session.getString("action"), StandardCharsets.UTF_8);
    if (invoke.equals("web")) {
      return "/api/v1/web/guest/default/" + action + ".json";
    }
    return "/api/v1/namespaces/" + namespace + "/actions/" + action
        + "?blocking=" + blocking + "&result=" + result;
  }

  private Session record(Session session) {
    long done = System.nanoTime();
    long start = startNanos.get();
    int status = session.contains("status") ? session.getInt("status") : 0;
    String aid = session.contains("aidHeader") ? session.getString("aidHeader") : "";
    if (aid.isEmpty() && session.contains("body")) {
      aid = activationId(session.getString("body"));
    }
    String error = status == 0 ? "no response" : (status >= 400 ? "http " + status : "");
    log.write(
        session.getInt("seq"),
        session.getString("action"),
        session.getDouble("t"),
        (session.getLong("sentNs") - start) / 1e9,
        (done - start) / 1e9,
        status,
        aid,
        error,
        startEpochS);
    return session;
  }

  private static String activationId(String body) {
    try {
      JsonNode node = JSON.readTree(body);
      JsonNode aid = node == null ? null : node.get("activationId");
      return aid == null ? "" : aid.asText();
    } catch (IOException | RuntimeException e) {
      return "";
    }
  }

  private static List<Map<String, Object>> readScenario(Path path) {
    List<Map<String, Object>> out = new ArrayList<>();
    try {
      int line = 0;
      for (String text : Files.readAllLines(path, StandardCharsets.UTF_8)) {
        line++;
        if (text.isBlank() || text.startsWith("#")) {
          continue;
        }
        JsonNode node = JSON.readTree(text);
        if (!node.hasNonNull("t") || !node.hasNonNull("action")) {
          throw new IllegalArgumentException(path + ":" + line + ": needs \"t\" and \"action\"");
        }
        Map<String, Object> call = new HashMap<>();
        call.put("seq", node.hasNonNull("seq") ? node.get("seq").asInt() : out.size());
        call.put("t", node.get("t").asDouble());
        call.put("action", node.get("action").asText());
        JsonNode params = node.get("params");
        call.put("params", params == null || params.isNull() ? "{}" : JSON.writeValueAsString(params));
        out.add(call);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    out.sort((a, b) -> Double.compare((double) a.get("t"), (double) b.get("t")));
    return out;
  }

  private static String prop(String name, String fallback) {
    String v = System.getProperty(name);
    return v == null || v.isBlank() ? fallback : v;
  }

  private static String required(String name) {
    String v = System.getProperty(name);
    if (v == null || v.isBlank()) {
      throw new IllegalArgumentException("set -D" + name + "=...");
    }
    return v;
  }

  /** Per-request timings, one CSV row each, written as replies arrive. */
  static final class TimingLog {
    static final String HEADER =
        "seq,action,scheduled_s,sent_s,done_s,response_s,status,activation_id,error,epoch_start_s";
    private final BufferedWriter out;
    private final List<Double> lateness = new ArrayList<>();

    TimingLog(Path path) {
      try {
        Path parent = path.toAbsolutePath().getParent();
        if (parent != null) {
          Files.createDirectories(parent);
        }
        out = Files.newBufferedWriter(path, StandardCharsets.UTF_8);
        out.write(HEADER);
        out.newLine();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    synchronized void write(
        int seq, String action, double scheduled, double sent, double done, int status,
        String aid, String error, double epochStart) {
      lateness.add(Math.max(0.0, sent - scheduled));
      try {
        out.write(
            String.format(
                Locale.ROOT,
                "%d,%s,%.6f,%.6f,%.6f,%.6f,%d,%s,%s,%.6f",
                seq, action, scheduled, sent, done, done - sent, status, aid, error, epochStart));
        out.newLine();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    synchronized void close() {
      try {
        out.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    synchronized String latenessSummary() {
      if (lateness.isEmpty()) {
        return "replayed 0 requests";
      }
      double[] v = lateness.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      return String.format(
          Locale.ROOT,
          "replayed %d requests; send lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms",
          v.length, 1e3 * at(v, 0.50), 1e3 * at(v, 0.99), 1e3 * v[v.length - 1]);
    }

    private static double at(double[] sorted, double q) {
      int i = (int) Math.ceil(q * sorted.length) - 1;
      return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
  }
}
