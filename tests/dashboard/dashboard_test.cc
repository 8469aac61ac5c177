// The dashboard end to end: headless chromium (driven by chromedriver) against a real
// `delayq serve` seeded over the API. Each test saves screenshots in DELAYQ_SCREENSHOTS
// (build/dashboard-screenshots) for a person to look at.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "delayq/clock.h"
#include "integration/server_fixture.h"
#include "support/test_certs.h"
#include "support/webdriver.h"

namespace delayq::testing {
namespace {

using json = nlohmann::json;

std::string Shot(const std::string& name) {
  ::mkdir(DELAYQ_SCREENSHOTS, 0755);
  return std::string(DELAYQ_SCREENSHOTS) + "/" + name + ".png";
}

EnqueueRequest Job(std::string payload) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  return r;
}

// A dead job in `queue` (max_attempts 1, reserved, nacked with `error`); returns its id.
std::string MakeDead(Client& c, const std::string& queue, const std::string& error) {
  QueueConfig config;
  config.max_attempts = 1;
  EXPECT_TRUE(c.SetConfig(queue, config).ok());
  auto e = c.Enqueue(queue, Job(R"({"order":7})"));
  auto got = c.Reserve(queue, {1, 0, std::nullopt});
  EXPECT_TRUE(got.ok() && got->size() == 1);
  EXPECT_TRUE(c.Nack(queue, {(*got)[0].receipt, std::nullopt, error, false}).ok());
  return e->id;
}

class DashboardTest : public ::testing::Test {
 protected:
  ServerProcess server_{{"--durability", "none"}};
  std::unique_ptr<Client> api_ = server_.NewClient();
  WebDriver browser_;
  std::string Url(const std::string& hash = "") { return server_.url() + "/" + hash; }
  // The text of a cell of the overview's row for `queue` (0 = name, 1 = scheduled, ...).
  std::string Cell(const std::string& queue, int column) {
    return browser_.Wait("document.querySelector('tr[data-queue=\"" + queue +
                         "\"]') && document.querySelector('tr[data-queue=\"" + queue + "\"]').children[" +
                         std::to_string(column) + "].textContent");
  }
};

TEST_F(DashboardTest, OverviewShowsTheSeededCounts) {
  std::vector<EnqueueRequest> orders;
  for (int i = 0; i < 10; ++i) orders.push_back({.payload = "1", .when = {.delay_ms = 3'600'000}});
  ASSERT_TRUE(api_->EnqueueBatch("orders", orders).ok());
  ASSERT_TRUE(api_->Enqueue("payments", Job("2")).ok());
  MakeDead(*api_, "fails", "card declined");
  browser_.Go(Url());
  EXPECT_EQ(Cell("orders", 1), "10");   // scheduled
  EXPECT_EQ(Cell("payments", 2), "1");  // ready
  EXPECT_EQ(Cell("fails", 4), "1");     // dead
  EXPECT_EQ(browser_.Text("[data-testid=total-queues]"), "3");
  EXPECT_EQ(browser_.Text("[data-testid=total-scheduled]"), "10");
  browser_.Screenshot(Shot("overview"));
  // The filter narrows the table.
  browser_.Type("input[type=search]", "pay");
  browser_.Wait("document.querySelectorAll('tbody tr').length === 1");
  EXPECT_EQ(browser_.Exec("return document.querySelector('tbody tr').dataset.queue"), "payments");
}

TEST_F(DashboardTest, DueHistogramMatchesTheSeededDueTimes) {
  const int64_t minute = 60'000, now = SystemClock().NowMs();
  std::vector<int64_t> seeded;
  for (int m : {5, 5, 5, 20, 20, 50}) seeded.push_back(now / minute * minute + m * minute + 30'000);
  std::vector<EnqueueRequest> jobs;
  for (int64_t t : seeded) jobs.push_back({.payload = "1", .when = {.deliver_at_ms = t}});
  for (int i = 0; i < 4; ++i) jobs.push_back({.payload = "2", .when = {.delay_ms = 2 * 86'400'000LL}});
  ASSERT_TRUE(api_->EnqueueBatch("orders", jobs).ok());
  browser_.Go(Url("#/queue/orders"));
  browser_.Wait("document.querySelectorAll('[data-testid=due-hour] rect').length === 60");
  const int64_t start = std::stoll(
      browser_.Exec("return document.querySelector('[data-testid=due-hour]').dataset.start").get<std::string>());
  json values = browser_.Exec(
      "return [...document.querySelectorAll('[data-testid=due-hour] rect')].map(r => Number(r.dataset.value))");
  std::vector<int64_t> expected(60, 0);
  for (int64_t t : seeded) ++expected[static_cast<size_t>((t - start) / minute)];
  EXPECT_EQ(values.get<std::vector<int64_t>>(), expected);
  json week = browser_.Exec(
      "return [...document.querySelectorAll('[data-testid=due-week] rect')].map(r => Number(r.dataset.value))");
  auto w = week.get<std::vector<int64_t>>();
  ASSERT_EQ(w.size(), 168u);
  EXPECT_EQ(w[47] + w[48], 4) << "the four jobs two days out";
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=stat-scheduled]').textContent"), "10");
  browser_.Screenshot(Shot("queue"));

  // The config is editable from the page, and a bad value is refused with a message.
  browser_.Clear("input[name=max_attempts]");
  browser_.Type("input[name=max_attempts]", "7");
  browser_.Click("button[type=submit].primary");
  browser_.Wait(
      "[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Saved the configuration of "
      "orders'))");
  EXPECT_EQ(api_->GetConfig("orders")->max_attempts, 7);
  browser_.Clear("input[name=lease_ms]");
  browser_.Type("input[name=lease_ms]", "soon");
  browser_.Click("button[type=submit].primary");
  browser_.Wait("[...document.querySelectorAll('.toast.error')].some(t => t.textContent.includes('lease_ms'))");

  // Pause and resume.
  browser_.Click(".toolbar button");
  browser_.Wait("document.querySelector('h1 .badge.paused')");
  EXPECT_TRUE(api_->Stats("orders")->paused);
  browser_.Click(".toolbar button");
  browser_.Wait("[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Resumed orders'))");
  EXPECT_FALSE(api_->Stats("orders")->paused);
}

TEST_F(DashboardTest, DeadJobIsReplayedAndPurgeAsksFirst) {
  const std::string dead = MakeDead(*api_, "fails", "card declined by the payment service");
  browser_.Go(Url("#/queue/fails/dead"));
  const std::string row = "tr[data-id=\"" + dead + "\"]";
  EXPECT_NE(browser_.Wait("document.querySelector('" + row + "') && document.querySelector('" + row + "').textContent")
                .get<std::string>()
                .find("card declined by the payment service"),
            std::string::npos);
  browser_.Screenshot(Shot("dead"));
  browser_.Click(row + " button");
  browser_.Wait("!document.querySelector('" + row + "')");
  EXPECT_EQ(api_->Get("fails", JobRef::ById(dead))->state, JobState::kReady);
  browser_.Go(Url("#/job/fails/" + dead));
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=job-state]') && "
                          "document.querySelector('[data-testid=job-state]').textContent"),
            "ready");

  const std::string second = MakeDead(*api_, "refunds", "second failure");
  browser_.Go(Url("#/queue/refunds/dead"));
  browser_.Wait("document.querySelector('tr[data-id=\"" + second + "\"]')");
  browser_.Click("button.danger");
  browser_.WaitForAlert();
  EXPECT_NE(browser_.AlertText().find("cannot be undone"), std::string::npos);
  browser_.DismissAlert();
  browser_.Wait("[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Nothing was purged'))");
  EXPECT_EQ(api_->Stats("refunds")->dead, 1) << "dismissing purges nothing";
  browser_.Click("button.danger");
  browser_.WaitForAlert();
  browser_.AcceptAlert();
  browser_.Wait("[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('Purged 1 dead jobs'))");
  EXPECT_EQ(api_->Stats("refunds")->dead, 0);
}

// A reserved job's progress, as its consumer's touch reported it, shows in the Reserved tab and on
// the job's page.
TEST_F(DashboardTest, AReservedJobShowsItsProgress) {
  auto made = api_->Enqueue("reports", Job(R"({"month":11})"));
  ASSERT_TRUE(made.ok());
  auto got = api_->Reserve("reports", {1, 0, std::nullopt});
  ASSERT_TRUE(got.ok() && got->size() == 1);
  ASSERT_TRUE(
      api_->Touch("reports", TouchRequest{(*got)[0].receipt, std::nullopt, R"({"rows": 120, "of": 1000})"}).ok());
  browser_.Go(Url("#/queue/reports/jobs/reserved"));
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=progress]') && "
                          "document.querySelector('[data-testid=progress]').textContent"),
            R"({"rows":120,"of":1000})");
  browser_.Go(Url("#/job/reports/" + made->id));
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=job-progress]') && "
                          "document.querySelector('[data-testid=job-progress]').textContent"),
            R"({"rows":120,"of":1000})");
  browser_.Screenshot(Shot("progress"));
}

// The Completed tab lists acked jobs kept by keep_completed_ms with their results, and the job
// page shows when it completed and its result.
TEST_F(DashboardTest, ACompletedJobShowsItsResult) {
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(api_->SetConfig("invoices", config).ok());
  auto made = api_->Enqueue("invoices", Job(R"({"n":7})"));
  ASSERT_TRUE(made.ok());
  auto got = api_->Reserve("invoices", {1, 0, std::nullopt});
  ASSERT_TRUE(got.ok() && got->size() == 1);
  ASSERT_TRUE(api_->Ack("invoices", AckRequest{(*got)[0].receipt, R"({"paid": 1999})"}).ok());
  browser_.Go(Url("#/queue/invoices/jobs/completed"));
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=result]') && "
                          "document.querySelector('[data-testid=result]').textContent"),
            R"({"paid":1999})");
  browser_.Go(Url("#/job/invoices/" + made->id));
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=job-result]') && "
                          "document.querySelector('[data-testid=job-result]').textContent"),
            R"({"paid":1999})");
  EXPECT_EQ(browser_.Text("[data-testid=job-state]"), "completed");
  browser_.Screenshot(Shot("completed"));
}

// The jobs of a state are browsed a page at a time with their payload shown; selected scheduled
// jobs are run now (they turn ready) or cancelled after a confirmation; the queue page says
// when lateness is the wait for a consumer.
TEST_F(DashboardTest, JobsAreBrowsedByStateAPageAtATimeWithBulkActions) {
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 150; ++i) {
    EnqueueRequest r = Job(R"({"invoice":)" + std::to_string(i) + "}");
    r.when.delay_ms = 3'600'000 + i * 1000;
    batch.push_back(r);
  }
  auto ids = api_->EnqueueBatch("billing", batch);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  browser_.Go(Url("#/queue/billing/jobs/scheduled"));
  const std::string rows = "document.querySelectorAll('[data-testid=jobs] tbody tr[data-id]').length";
  EXPECT_EQ(browser_.Wait(rows + " === 100 && " + rows), 100);
  EXPECT_EQ(browser_.Exec("return document.querySelector('[data-testid=preview]').textContent"), R"({"invoice":0})");
  browser_.Screenshot(Shot("jobs-scheduled"));
  browser_.Click("[data-testid=next]");
  EXPECT_EQ(browser_.Wait(rows + " === 50 && " + rows), 50);
  EXPECT_NE(browser_.Text("[data-testid=page-info]").find("page 2"), std::string::npos);
  EXPECT_TRUE(browser_.Exec("return document.querySelector('[data-testid=next]').disabled").get<bool>());
  browser_.Click("[data-testid=prev]");
  browser_.Wait("document.querySelector('tr[data-id=\"" + (*ids)[0].id + "\"]')");

  // Run two now: they leave the scheduled tab and are ready.
  for (int i : {0, 1}) browser_.Click("tr[data-id=\"" + (*ids)[static_cast<size_t>(i)].id + "\"] input");
  browser_.Click("[data-testid=run-selected]");
  browser_.Wait("!document.querySelector('tr[data-id=\"" + (*ids)[1].id + "\"]')");
  EXPECT_EQ(api_->Get("billing", JobRef::ById((*ids)[0].id))->state, JobState::kReady);
  EXPECT_EQ(api_->Get("billing", JobRef::ById((*ids)[1].id))->state, JobState::kReady);
  browser_.Click("[data-testid=tab-ready]");
  EXPECT_EQ(browser_.Wait(rows + " === 2 && " + rows), 2);

  // Cancel one from the scheduled tab: asked first.
  browser_.Click("[data-testid=tab-scheduled]");
  const std::string third = "tr[data-id=\"" + (*ids)[2].id + "\"]";
  browser_.Wait("document.querySelector('" + third + "')");
  browser_.Click(third + " input");
  browser_.Click("[data-testid=cancel-selected]");
  browser_.WaitForAlert();
  browser_.AcceptAlert();
  browser_.Wait("!document.querySelector('" + third + "')");
  EXPECT_EQ(api_->Get("billing", JobRef::ById((*ids)[2].id)).code(), Code::kNotFound);

  // Nobody takes the two ready jobs: once they waited a second, the queue page says lateness is
  // the wait for a consumer.
  browser_.Go(Url("#/queue/billing"));
  browser_.Wait("document.querySelector('[data-testid=consumer-wait].warn')", 20'000);
  EXPECT_NE(browser_.Text("[data-testid=consumer-wait]").find("Waiting for consumers: 2 jobs are ready"),
            std::string::npos);
  browser_.Screenshot(Shot("consumer-wait"));
}

// A queue's recurring schedules: added from the page (cron in a time zone), listed with their
// next runs, paused and deleted from their row; a bad expression is refused with its message.
TEST_F(DashboardTest, SchedulesAreAddedPausedAndDeletedFromTheQueuePage) {
  ASSERT_TRUE(api_->Enqueue("reports", Job("1")).ok());
  browser_.Go(Url("#/queue/reports"));
  browser_.Wait("document.querySelector('[data-testid=schedules] table')");
  browser_.Type("input[name=schedule-name]", "morning");
  browser_.Type("input[name=schedule-when]", "0 9 * * MON-FRI");
  browser_.Clear("input[name=schedule-tz]");
  browser_.Type("input[name=schedule-tz]", "Europe/Berlin");
  browser_.Click("[data-testid=add-schedule]");
  browser_.Wait("document.querySelector('[data-testid=schedule-morning]')");
  auto s = api_->GetSchedule("reports", "morning");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->spec.timezone, "Europe/Berlin");
  EXPECT_NE(browser_.Text("[data-testid=schedule-morning]").find("0 9 * * MON-FRI (Europe/Berlin)"), std::string::npos);
  browser_.Screenshot(Shot("schedules"));

  browser_.Click("[data-testid=schedule-morning] button");  // Pause
  browser_.Wait("document.querySelector('[data-testid=schedule-morning] .badge.paused')");
  EXPECT_TRUE(api_->GetSchedule("reports", "morning")->paused);

  browser_.Clear("input[name=schedule-name]");
  browser_.Type("input[name=schedule-name]", "bad");
  browser_.Clear("input[name=schedule-when]");
  browser_.Type("input[name=schedule-when]", "0 25 * * *");
  browser_.Click("[data-testid=add-schedule]");
  browser_.Wait("[...document.querySelectorAll('.toast.error')].some(t => t.textContent.includes('hour'))");
  EXPECT_EQ(api_->GetSchedule("reports", "bad").code(), Code::kNotFound);

  browser_.Exec("window.confirm = () => true");
  browser_.Exec("document.getElementById('toasts').replaceChildren()");  // they cover the row's buttons
  browser_.Click("[data-testid=schedule-morning] button.danger");
  browser_.Wait("!document.querySelector('[data-testid=schedule-morning]')");
  EXPECT_EQ(api_->GetSchedule("reports", "morning").code(), Code::kNotFound);
}

TEST_F(DashboardTest, JobLookupByKeyWithTheKeyboardAndReschedule) {
  EnqueueRequest r = Job(R"({"amount":1.5})");
  r.key = "pay-1";
  r.headers = {{"version", "2"}};
  ASSERT_TRUE(api_->Enqueue("payments", r).ok());
  browser_.Go(Url("#/find"));
  browser_.Wait("document.activeElement && document.activeElement.id === 'find-queue'");
  browser_.Type("#find-queue", "payments");
  browser_.Type("#find-ref", "pay-1");
  browser_.Exec("document.querySelector('#find-kind').value = 'key'");
  browser_.Type("#find-ref", "\xee\x80\x87");  // U+E007: the Enter key submits the form
  EXPECT_EQ(browser_.Wait("document.querySelector('[data-testid=job-state]') && "
                          "document.querySelector('[data-testid=job-state]').textContent"),
            "ready");
  EXPECT_NE(browser_.Text("[data-testid=payload]").find("\"amount\": 1.5"), std::string::npos);
  EXPECT_NE(browser_.Text("[data-testid=job]").find("version"), std::string::npos);
  browser_.Type("input[aria-label='New delay']", "10m");
  browser_.Click("form.toolbar button");
  EXPECT_EQ(
      browser_.Wait("document.querySelector('[data-testid=job-state]').textContent === 'scheduled' && 'scheduled'"),
      "scheduled");
  browser_.Screenshot(Shot("job"));
  EXPECT_EQ(api_->Get("payments", JobRef::ByKey("pay-1"))->state, JobState::kScheduled);
  browser_.Go(Url("#/job/payments/01JDQ8Z3K6T6V3W1C9X2N4M5PQ"));
  EXPECT_NE(browser_
                .Wait("document.querySelector('[data-testid=job-error]') && "
                      "document.querySelector('[data-testid=job-error]').textContent")
                .get<std::string>()
                .find("not_found"),
            std::string::npos);
}

TEST_F(DashboardTest, ThousandQueuesArePagedOnTheOverview) {
  for (int i = 0; i < 1000; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "load.%04d", i);
    ASSERT_TRUE(api_->Enqueue(name, {.payload = "1", .when = {.delay_ms = 3'600'000}}).ok());
  }
  const auto t0 = std::chrono::steady_clock::now();
  browser_.Go(Url());
  browser_.Wait(
      "document.querySelector('.pager') && document.querySelector('.pager').textContent.includes('1000 queues')");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // A figure for people, not an assertion: timing belongs in benchmarks on a shared machine.
  std::cout << "overview of 1000 queues loaded in " << ms << " ms\n";
  EXPECT_EQ(browser_.Exec("return document.querySelectorAll('tbody tr').length"), 50);
}

TEST(DashboardPhone, ReadableAtPhoneWidth) {
  ServerProcess server({"--durability", "none"});
  ASSERT_TRUE(server.NewClient()->Enqueue("orders", Job("1")).ok());
  WebDriver phone(390, 844);
  phone.Go(server.url() + "/");
  phone.Wait("document.querySelector('tr[data-queue=\"orders\"]')");
  phone.Screenshot(Shot("overview-phone"));
  EXPECT_LE(phone.Exec("return document.documentElement.scrollWidth - window.innerWidth").get<int>(), 0)
      << "the page itself does not scroll sideways";
}

TEST(DashboardAuth, AsksForTheTokenOnceAndKeepsItForTheTab) {
  ServerProcess server({"--durability", "none", "--auth-token", "s3cret"});
  ASSERT_TRUE(server.NewClient({.auth_token = "s3cret"})->Enqueue("private", Job("1")).ok());
  WebDriver tab;
  tab.Go(server.url() + "/");
  tab.Wait("document.querySelector('#token-dialog[open]')");
  tab.Screenshot(Shot("token"));
  tab.Type("#token-input", "wrong\xee\x80\x87");
  tab.Wait("document.querySelector('#token-error').textContent.includes('refused')");
  tab.Clear("#token-input");
  tab.Type("#token-input", "s3cret\xee\x80\x87");
  tab.Wait("document.querySelector('tr[data-queue=\"private\"]')");
  tab.Go(server.url() + "/#/queue/private");
  tab.Wait("document.querySelector('[data-testid=stat-ready]')");
  EXPECT_EQ(tab.Exec("return document.querySelectorAll('#token-dialog[open]').length"), 0) << "asked only once";
}

// Over HTTPS (found: every answer over ~16 KB lost its body, the 46 KB page among them): the page,
// its script and the API answers all arrive, and the dashboard works as over HTTP.
TEST(DashboardTls, WorksOverHttps) {
  TestCerts certs;
  ServerProcess server({"--durability", "none", "--tls-cert", certs.cert("server"), "--tls-key", certs.key("server")});
  auto client = server.NewClient({.tls_ca_file = certs.ca()});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Enqueue("secure", Job(std::to_string(i))).ok());
  WebDriver tab(1280, 800, /*accept_insecure_certs=*/true);
  tab.Go(server.url() + "/");
  tab.Wait("document.querySelector('tr[data-queue=\"secure\"]')");
  tab.Go(server.url() + "/#/queue/secure");
  EXPECT_EQ(tab.Wait("(() => { const e = document.querySelector('[data-testid=stat-ready]'); "
                     "return e && e.textContent.trim() === '3' && e.textContent.trim(); })()"),
            "3");
  tab.Screenshot(Shot("https"));
}

}  // namespace
}  // namespace delayq::testing
