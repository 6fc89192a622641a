package definition

import "github.com/picomq/pico-connectors/runtime/confkit"

// Problem is confkit.Problem, the module's one problem type: Load reports
// the file, the key inside it (dotted, with [i] for array elements, empty
// for the file as a whole) and what is wrong.
//
// Deprecated: use confkit.Problem; this alias goes once its last user, the
// command line, names confkit.
type Problem = confkit.Problem

// Problems is confkit.Problems: every problem found while loading.
//
// Deprecated: use confkit.Problems.
type Problems = confkit.Problems
