package v1alpha1

// AbsolutePath is an absolute, clean path on a file system, at most 1024
// characters long: it starts with '/', and has no trailing '/' (except "/"
// itself), no empty, '.' or '..' elements and no NUL, which no file name
// holds. Paths are compared as strings, so only clean paths can be checked
// against prefixes; that is why the rules are strict. The API holds UTF-8
// text only: a directory whose name is not UTF-8 (Latin-1 from an older
// system) cannot be named here, only one above it.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="path must be absolute (start with '/')"
// +kubebuilder:validation:XValidation:rule="self == '/' || !self.endsWith('/')",message="path must not end with '/'"
// +kubebuilder:validation:XValidation:rule="!self.contains('//')",message="path must not contain '//'"
// +kubebuilder:validation:XValidation:rule="!self.contains('/./') && !self.endsWith('/.')",message="path must not contain '.' elements"
// +kubebuilder:validation:XValidation:rule="!self.contains('/../') && !self.endsWith('/..')",message="path must not contain '..' elements"
// +kubebuilder:validation:XValidation:rule="!self.contains('\\x00')",message="path must not contain a NUL byte"
type AbsolutePath string

// BackingPath names a directory on one of a pool's backing file systems.
type BackingPath struct {
	// filesystem is the name of the backing file system, one of the names in
	// the pool's spec.backingFilesystems.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Filesystem string `json:"filesystem"`

	// path is the directory, written as jobs see it (for example
	// /lus/global/projects/climate): absolute, clean, and under the file
	// system's mountPath. The pool must grant a prefix of it to the
	// namespace.
	// +required
	Path AbsolutePath `json:"path"`
}
