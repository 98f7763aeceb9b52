// Two "LEDs" blinking at different periods, each driven by one cbtask task
// that sleeps between toggles: the example of the callback-thread study, made
// to end by itself. Every toggle prints its time since start and how late it
// is against the ideal schedule (k * half-period).
//
//   blink [--seconds S] [--toggles N] [--period1 MS] [--period2 MS] [--fake-clock]
//
// Stops after S seconds (default 3) or after N toggles in total, whichever
// comes first. --fake-clock runs on simulated time (instant, deterministic).
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cbtask/cbtask.hpp"

namespace {

struct Options {
  double seconds = 3.0;
  long toggles = -1;  // no limit
  long period1_ms = 500;
  long period2_ms = 300;
  bool fake_clock = false;
};

[[noreturn]] void usage(const char* problem) {
  if (problem) std::fprintf(stderr, "blink: %s\n", problem);
  std::fprintf(stderr,
               "usage: blink [--seconds S] [--toggles N] [--period1 MS] [--period2 MS] [--fake-clock]\n"
               "  --seconds S    stop after S seconds (default 3)\n"
               "  --toggles N    stop after N toggles in total (default: no limit)\n"
               "  --period1 MS   full blink period of LED1 in ms (default 500)\n"
               "  --period2 MS   full blink period of LED2 in ms (default 300)\n"
               "  --fake-clock   simulated time: runs instantly, same output every time\n");
  std::exit(2);
}

long parse_long(const char* opt, const char* text, long min) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < min) {
    const std::string msg = std::string(opt) + " wants an integer >= " + std::to_string(min) + ", got '" + text + "'";
    usage(msg.c_str());
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--seconds") {
      const char* v = value();
      char* end = nullptr;
      o.seconds = std::strtod(v, &end);
      if (end == v || *end || !(o.seconds > 0)) usage("--seconds wants a number > 0");
    } else if (a == "--toggles") {
      o.toggles = parse_long("--toggles", value(), 1);
    } else if (a == "--period1") {
      o.period1_ms = parse_long("--period1", value(), 2);
    } else if (a == "--period2") {
      o.period2_ms = parse_long("--period2", value(), 2);
    } else if (a == "--fake-clock") {
      o.fake_clock = true;
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
    } else {
      usage(("unknown option '" + a + "'; valid: --seconds --toggles --period1 --period2 --fake-clock").c_str());
    }
  }
  return o;
}

// One LED: toggled by its own task, which lives as long as the demo.
struct Led {
  const char* name;
  long half_period_ms;
  bool on = false;
  long toggles = 0;
  cbtask::Task task;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  cbtask::FakeClock fake;
  cbtask::Scheduler s(opt.fake_clock ? static_cast<cbtask::Clock&>(fake) : cbtask::steady_clock());

  const std::int64_t start = s.now_ns();
  long total = 0;
  Led leds[2] = {{"LED1", opt.period1_ms / 2, false, 0, {}}, {"LED2", opt.period2_ms / 2, false, 0, {}}};
  cbtask::Task timer;

  auto toggle = [&](Led& led, bool state) {
    led.on = state;
    const std::int64_t t = s.now_ns() - start;
    const std::int64_t ideal = led.toggles * led.half_period_ms * 1000000;
    ++led.toggles;
    std::printf("%10.3f ms  %s %-3s  late %7.3f ms\n", static_cast<double>(t) / 1e6, led.name, state ? "on" : "off",
                static_cast<double>(t - ideal) / 1e6);
    if (opt.toggles > 0 && ++total >= opt.toggles) {
      // Enough: end both blinkers and the timer; run() returns when no task is left.
      for (Led& l : leds) l.task.cancel();
      timer.cancel();
    }
  };

  // As in the study: loop { on; sleep(half, { off; sleep(half, {}) }) }.
  // An iteration ends when its sleeps are done, then the loop goes on.
  for (Led& led : leds) {
    led.task = s.loop([&] {
      toggle(led, true);
      s.sleep(led.half_period_ms, [&] {
        toggle(led, false);
        s.sleep(led.half_period_ms, [] {});
      });
    });
  }
  const auto limit_ms = static_cast<std::int64_t>(opt.seconds * 1000.0);
  timer = s.sleep(limit_ms, [&] {
    for (Led& l : leds) l.task.cancel();
  });

  s.run();
  std::printf("%ld toggles in %.3f ms (LED1 %ld, LED2 %ld)\n", leds[0].toggles + leds[1].toggles,
              static_cast<double>(s.now_ns() - start) / 1e6, leds[0].toggles, leds[1].toggles);
  return 0;
}
