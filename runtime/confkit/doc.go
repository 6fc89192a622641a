// Package confkit is what a connector sees of its configuration: the types
// of a generated Config's fields (Size, Secret, Template, and Ptr for its
// optional keys), the Problem that every configuration error of the module
// is, and the one "did you mean" suggestion (DidYouMean).
//
// The helpers that the generated Load calls to get there (environment
// overrides, aliases, the JSON Schema check, the dialect's x- rules) are in
// sdk/confgen, which exists only for generated code.
package confkit
