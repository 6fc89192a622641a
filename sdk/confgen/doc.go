// Package confgen exists for the configuration packages that picogen
// generates: they call it at run time, and connector code should not. It
// turns the raw TOML of a plugin_config into a typed Config (environment
// overrides, key and value aliases, the JSON Schema check, the dialect's x-
// rules) and reports what is wrong as confkit.Problems.
//
// It is public only so that code generated in another module can import
// it; its API follows what picogen generates, and changes with it.
//
// Generated code calls these helpers with everything it knows from the
// schema; confgen never inspects a schema at run time, except to compile
// it for the JSON Schema check (see CompileSchema). The types a connector
// sees in its Config (Size, Secret, Template) and the Problem it reports
// are in the public package runtime/confkit.
package confgen
