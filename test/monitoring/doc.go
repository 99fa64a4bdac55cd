// Package monitoring reads the metric names out of PromQL expressions, so
// that its tests can hold the Grafana dashboard of config/monitoring and the
// alerts of docs/monitoring.md to the metrics burstcache really exports: a
// metric renamed in a server or the manager breaks them here rather than on
// an operator's screen.
//
// It is a small tokenizer, not a PromQL parser: it knows the syntax that
// decides whether a word names a metric (label matchers, ranges, grouping
// lists, function calls, keywords, strings) and reports unbalanced brackets,
// unterminated strings and selectors without a metric name, which it cannot
// check. Grafana's $variables are accepted where a value or a duration goes.
package monitoring
