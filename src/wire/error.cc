#include "wire/error.h"

#include <fmt/format.h>

#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {

std::string ErrorBody(Code code, std::string_view message) {
  JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("code").String(CodeName(code));
  w.Key("message").String(message);
  w.EndObject().EndObject();
  return w.Take();
}

namespace {

// 503, and a proxy's 502 and 504 (docs/security.md puts delayq behind one): the server is down,
// restarting or cannot serve now, and a caller may try again.
bool GatewayOrUnavailable(int http_status) { return http_status == 502 || http_status == 503 || http_status == 504; }

}  // namespace

Status ParseErrorResponse(int http_status, std::string_view body) {
  auto d = OpenResponse(body, "error");
  if (d.ok()) {
    sj::object o;
    sj::value e;
    sj::object eo;
    if (!(*d)->doc.get_object().get(o) && !o.find_field_unordered("error").get(e) && !e.get_object().get(eo)) {
      std::string code, message;
      for (auto f : eo) {
        std::string_view k;
        sj::value v;
        if (f.unescaped_key().get(k) || f.value().get(v)) break;
        if (k == "code") code = Str(v);
        else if (k == "message") message = Str(v);
      }
      Code c = CodeFromName(code);
      if (c == Code::kOk) c = Code::kInternal;           // an error answer is never ok, whatever it says
      if (c == Code::kInternal && code != "internal") {  // a transport code, e.g. method_not_allowed
        c = http_status == 401                         ? Code::kUnauthenticated
            : http_status == 404                       ? Code::kNotFound
            : http_status == 413 || http_status == 431 ? Code::kTooLarge
            : http_status == 429                       ? Code::kResourceExhausted
            : GatewayOrUnavailable(http_status)        ? Code::kUnavailable
            : http_status >= 400 && http_status < 500  ? Code::kInvalidArgument
                                                       : Code::kInternal;
      }
      return Status(c, message.empty() ? fmt::format("HTTP {}", http_status) : message);
    }
  }
  return Status(GatewayOrUnavailable(http_status) ? Code::kUnavailable : Code::kInternal,
                fmt::format("HTTP {}: {}", http_status, body.substr(0, 200)));
}

}  // namespace delayq::wire
