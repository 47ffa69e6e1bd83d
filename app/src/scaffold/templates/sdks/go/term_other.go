//go:build !linux && !wasip1

package tick

import "os"

// rawMode and size need a platform's terminal calls; elsewhere than Linux
// the native loop runs with the terminal as it is, at 120x30.
func rawMode(*os.File) func() { return func() {} }

func size() (int, int) { return 120, 30 }
