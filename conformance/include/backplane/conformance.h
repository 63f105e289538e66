// The conformance suite: cases that check a backend against docs/semantics.md
// (conformance/case.h), differential op cases that compare it with a
// reference backend (conformance/op_case.h), the runner that isolates each
// case in a child process (conformance/runner.h) and the reports
// (conformance/report.h).
#pragma once

#include <backplane/conformance/backends.h>
#include <backplane/conformance/case.h>
#include <backplane/conformance/op_case.h>
#include <backplane/conformance/report.h>
#include <backplane/conformance/runner.h>
