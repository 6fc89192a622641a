// Package confkit is the support library of the configuration packages that
// picogen generates: the size, secret, duration and template types, the
// Problem list that Load returns, "did you mean" suggestions, and the helpers
// that read environment overrides and raw TOML values.
//
// Generated code calls these helpers with everything it knows from the
// schema; confkit itself never inspects a schema at run time, except to
// compile it for the JSON Schema check (see CompileSchema).
package confkit
