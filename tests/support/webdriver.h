// A small W3C WebDriver client for browser tests: Debian's chromedriver driving headless
// chromium, spoken to over HTTP with delayq's own HTTP client. Only what the dashboard test
// needs. Waiting for the page is done inside the browser (an async script that resolves when a
// condition holds), not by sleeping here.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "client/http_connection.h"
#include "support/process.h"
#include "wire/json_writer.h"

namespace delayq::testing {

class WebDriver {
 public:
  using json = nlohmann::json;

  // accept_insecure_certs: take a certificate no CA of the system signed (a test's own CA).
  explicit WebDriver(int width = 1280, int height = 800, bool accept_insecure_certs = false) {
    const int port = FreeTcpPort();
    driver_ = std::make_unique<Child>(std::vector<std::string>{"chromedriver", "--port=" + std::to_string(port)},
                                      dir_.Sub("chromedriver.log"));
    if (driver_->WaitForLine("started successfully").empty()) {
      throw std::runtime_error("chromedriver did not start: " + ReadFile(dir_.Sub("chromedriver.log")));
    }
    auto pool = client::HttpConnectionPool::Create("http://127.0.0.1:" + std::to_string(port), "", 60'000);
    if (!pool.ok()) throw std::runtime_error(pool.status().ToString());
    http_ = std::move(*pool);
    json caps = {{"capabilities",
                  {{"alwaysMatch",
                    {{"browserName", "chrome"},
                     {"unhandledPromptBehavior", "ignore"},
                     {"acceptInsecureCerts", accept_insecure_certs},
                     {"goog:chromeOptions",
                      {{"binary", "/usr/bin/chromium"},
                       {"args",
                        {"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                         "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
                         "--disable-dev-shm-usage",  // containers and chroots often lack /dev/shm
                         "--user-data-dir=" + dir_.Sub("profile"),
                         "--window-size=" + std::to_string(width) + "," + std::to_string(height)}}}}}}}}};
    json r = Call("POST", "/session", caps);
    session_ = "/session/" + r["sessionId"].get<std::string>();
    Call("POST", session_ + "/timeouts", {{"script", 30'000}, {"implicit", 0}, {"pageLoad", 30'000}});
  }

  ~WebDriver() {
    if (!session_.empty()) {
      try {
        Call("DELETE", session_, nullptr);
      } catch (...) {
      }
    }
  }

  void Go(const std::string& url) { Call("POST", session_ + "/url", {{"url", url}}); }

  json Exec(const std::string& script, json args = json::array()) {
    return Call("POST", session_ + "/execute/sync", {{"script", script}, {"args", args}});
  }

  // Resolves when `condition` (a JS expression) is truthy, with its value; fails the test after
  // timeout_ms. The polling happens in the page, on animation frames.
  json Wait(const std::string& condition, int timeout_ms = 15'000) {
    const std::string script =
        "const done = arguments[arguments.length - 1]; const end = Date.now() + " + std::to_string(timeout_ms) +
        "; const check = () => { let v; try { v = (" + condition +
        "); } catch (e) { v = undefined; } if (v) done({ok: true, value: v}); else if (Date.now() > end) "
        "done({ok: false}); else setTimeout(check, 15); }; check();";
    json r = Call("POST", session_ + "/execute/async", {{"script", script}, {"args", json::array()}});
    if (!r.is_object() || !r.value("ok", false)) {
      ADD_FAILURE() << "timed out waiting for: " << condition;
      throw std::runtime_error("timed out waiting for: " + condition);
    }
    return r["value"];
  }

  std::string Element(const std::string& css) {
    json r = Call("POST", session_ + "/element", {{"using", "css selector"}, {"value", css}});
    return r.begin().value().get<std::string>();
  }
  void Click(const std::string& css) { ActOn(css, "/click", json::object()); }
  void Type(const std::string& css, const std::string& text) { ActOn(css, "/value", {{"text", text}}); }
  void Clear(const std::string& css) { ActOn(css, "/clear", json::object()); }
  std::string Text(const std::string& css) {
    return Exec("return document.querySelector(arguments[0]).textContent", {css});
  }

  // The JS confirm()/alert() on the page.
  std::string AlertText() { return Call("GET", session_ + "/alert/text", nullptr).get<std::string>(); }
  void AcceptAlert() { Call("POST", session_ + "/alert/accept", json::object()); }
  void DismissAlert() { Call("POST", session_ + "/alert/dismiss", json::object()); }
  void WaitForAlert() {
    for (int i = 0; i < 2000; ++i) {  // each look is a round trip to chromedriver
      auto r = Request("GET", session_ + "/alert/text", nullptr);
      if (r.first == 200) return;
    }
    throw std::runtime_error("no dialog appeared");
  }

  void Screenshot(const std::string& path) {
    json r = Call("GET", session_ + "/screenshot", nullptr);
    auto png = wire::Base64Decode(r.get<std::string>());
    std::ofstream(path, std::ios::binary) << png.value_or("");
  }

 private:
  std::pair<int, json> Request(const std::string& method, const std::string& path, const json& body) {
    auto r = http_->Request(method, path, body.is_null() ? "" : body.dump(), 60'000);
    if (!r.ok()) throw std::runtime_error("chromedriver: " + r.status().ToString());
    json parsed = json::parse(r->body, nullptr, false);
    return {r->status, parsed.is_discarded() ? json() : parsed};
  }

  // An action on the element `css` finds: the dashboard redraws its pages as their data
  // refreshes, and an element found just before a redraw is gone by the action ("stale element
  // reference", CI saw it under ASan): the action is tried again on the element found anew.
  void ActOn(const std::string& css, const std::string& action, const json& body) {
    for (int attempt = 0;; ++attempt) {
      auto [status, r] = Request("POST", session_ + "/element/" + Element(css) + action, body);
      if (status == 200) return;
      const bool stale = r.is_object() && r.contains("value") && r["value"].is_object() &&
                         r["value"].value("error", "") == "stale element reference";
      if (!stale || attempt == 10) {
        throw std::runtime_error("POST " + action + " on " + css + ": " + std::to_string(status) + " " +
                                 r.dump().substr(0, 500));
      }
    }
  }

  json Call(const std::string& method, const std::string& path, const json& body) {
    auto [status, r] = Request(method, path, body);
    if (status != 200) {
      throw std::runtime_error(method + " " + path + ": " + std::to_string(status) + " " + r.dump().substr(0, 500));
    }
    return r.contains("value") ? r["value"] : r;
  }

  TempDir dir_;
  std::unique_ptr<Child> driver_;
  std::unique_ptr<client::HttpConnectionPool> http_;
  std::string session_;
};

}  // namespace delayq::testing
