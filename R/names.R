#' Names shared with tfruns, tensorflow and tfestimators
#'
#' tpuestimatorr is used beside tfruns (its runs are tfruns runs) and by users
#' of the tensorflow and tfestimators R packages, so what a name does must not
#' depend on the order of `library()` calls. The rule:
#'
#' * **Runs and TensorBoard: distinct names.** This package's run functions are
#'   [tpu_ls_runs()], [tpu_latest_run()], [tpu_run_info()], [tpu_view_run()],
#'   [tpu_compare_runs()] and [tpu_tensorboard()]; it exports no `ls_runs`,
#'   `latest_run`, `run_info`, `view_run`, `compare_runs` or `tensorboard`. With
#'   tfruns attached, `ls_runs()`, `view_run()`, `compare_runs()` and
#'   `latest_run()` are tfruns's own, which read the runs this package writes
#'   (they are in tfruns's format); with tensorflow attached, `tensorboard()` is
#'   tensorflow's (`tensorboard("runs")` shows the runs too).
#' * **train(), evaluate(), export_savedmodel(): one behaviour under either
#'   name.** tensorflow (and tfestimators) export generics of these names, and so
#'   does this package, for [tpu_estimator()] objects. When tensorflow or
#'   tfestimators is loaded, the `tpu_estimator` methods are registered with their
#'   generics too, and this package's generics pass any other object on to
#'   theirs, so `train(est)` trains a `tpu_estimator` and `train(x)` of a
#'   tfestimators estimator reaches tfestimators, whichever was attached last.
#' * `predict()` is `stats::predict()`; `tpu_estimator` and `tpu_run` objects
#'   have methods.
#'
#' @name tpuestimatorr-names
#' @keywords internal
NULL

# Packages whose generics train/evaluate/export_savedmodel have the same role as ours.
foreign_generic_packages <- c("tensorflow", "tfestimators")

# The generic `name` of a loaded package in foreign_generic_packages, or NULL.
foreign_generic <- function(name) {
  for (pkg in foreign_generic_packages) {
    if (!isNamespaceLoaded(pkg)) next
    ns <- asNamespace(pkg)
    if (exists(name, envir = ns, inherits = FALSE)) return(get(name, envir = ns, inherits = FALSE))
  }
  NULL
}

# Registers `method` for the generic `generic` of `package` now (when loaded) and whenever it
# is loaded later, so a call through that package's generic dispatches to our method.
register_foreign_method <- function(package, generic, class, method) {
  force(package)
  force(generic)
  force(class)
  force(method)
  register <- function(...) {
    ns <- asNamespace(package)
    if (exists(generic, envir = ns)) registerS3method(generic, class, method, envir = ns)
  }
  if (isNamespaceLoaded(package)) register()
  setHook(packageEvent(package, "onLoad"), register)
  invisible()
}

register_foreign_methods <- function() {
  methods <- list(train = train.tpu_estimator, evaluate = evaluate.tpu_estimator,
                  export_savedmodel = export_savedmodel.tpu_estimator)
  for (pkg in foreign_generic_packages) {
    for (generic in names(methods)) register_foreign_method(pkg, generic, "tpu_estimator", methods[[generic]])
  }
}

# Our generics' default: another package's generic of the same name, when one is loaded.
forward_to_foreign_generic <- function(name, object, ...) {
  other <- foreign_generic(name)
  if (is.null(other)) {
    stop("No ", name, "() method for an object of class ", paste(class(object), collapse = "/"),
         ". tpuestimatorr's ", name, "() takes a tpu_estimator (see ?tpu_estimator).", call. = FALSE)
  }
  other(object, ...)
}
