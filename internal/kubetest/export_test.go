package kubetest

// SetBeforeUp makes f run when this process, holding the machine lock, is about to bring a
// cluster up; it returns a function that puts the previous hook back.
func SetBeforeUp(f func()) (restore func()) {
	old := beforeUp
	beforeUp = f
	return func() { beforeUp = old }
}
