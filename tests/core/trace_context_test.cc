// W3C Trace Context on jobs (core/trace_context.h): the values W3C's own examples give pass, and
// each way a hostile or careless producer breaks one is refused with what a good one looks like.
#include "core/trace_context.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq {
namespace {

const std::string kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContext, W3CsExamplesPass) {
  EXPECT_TRUE(ValidateTraceParent(kParent, "traceparent").ok());
  EXPECT_TRUE(ValidateTraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "t").ok());
  // A later version may add fields after the four.
  EXPECT_TRUE(ValidateTraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes", "t").ok());
  EXPECT_TRUE(
      ValidateTraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + std::string(200, 'x'), "t")
          .ok());
  EXPECT_TRUE(ValidateTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "tracestate").ok());
  EXPECT_TRUE(ValidateTraceState("", "tracestate").ok());
  EXPECT_TRUE(ValidateTraceState(" a=1 ,, b@vendor=x y", "tracestate").ok());
  EXPECT_EQ(TraceIdOf(kParent).value_or(""), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(TraceContext, AMalformedTraceparentIsRefusedWithAnExample) {
  for (const std::string& bad : {
           std::string(""),
           std::string("garbage"),
           std::string("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),   // upper case
           std::string("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),   // trace id zeros
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),   // parent id zeros
           std::string("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),   // version ff
           kParent + "-extra",                                                       // 00 has four fields
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),  // no dash after
           std::string("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e473\0-00f067aa0ba902b7-01", 55),
           std::string(100'000, 'a'),
           // A later version's fields: visible ASCII, 256 characters in all.
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\0", 57),
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a b"),
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\r\nX: y"),
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\xc3\xa9"),
           std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-") + std::string(201, 'x'),
       }) {
    const Status s = ValidateTraceParent(bad, "jobs[2].traceparent");
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("jobs[2].traceparent"), std::string::npos) << s.message();
    EXPECT_LT(s.message().size(), 400u) << "a huge value is not echoed whole";
    EXPECT_FALSE(TraceIdOf(bad).has_value());
  }
}

TEST(TraceContext, AMalformedTracestateIsRefused) {
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  for (const std::string& bad : {
           std::string("novalue"),
           std::string("Upper=1"),
           std::string("a=1,a=2"),
           std::string("a=b=c"),
           std::string("a=\x01"),
           std::string(513, 'a'),
           std::string("a=") + std::string(257, 'v'),
           many,
       }) {
    const Status s = ValidateTraceState(bad, "tracestate");
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("tracestate"), std::string::npos) << s.message();
  }
}

TEST(TraceContext, InHeadersAStateNeedsAParent) {
  EXPECT_TRUE(ValidateTraceHeaders({{"traceparent", kParent}, {"tracestate", "a=1"}}, "").ok());
  EXPECT_TRUE(ValidateTraceHeaders({{"other", "x"}}, "").ok());
  const Status lone = ValidateTraceHeaders({{"tracestate", "a=1"}}, "jobs[0].");
  EXPECT_EQ(lone.code(), Code::kInvalidArgument);
  EXPECT_NE(lone.message().find("jobs[0].tracestate is given without a traceparent"), std::string::npos);
  // Only the lower-case W3C names are the context; another spelling is an ordinary header.
  EXPECT_TRUE(ValidateTraceHeaders({{"Traceparent", "anything"}}, "").ok());
}

}  // namespace
}  // namespace delayq
