//! Conformance kit, leak checker and static checks for vfs (in progress).
