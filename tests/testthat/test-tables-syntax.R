# Errors and notes of tpu_train(df) and predict() write their fixes in R (issue 34): the fix
# shown parses as R arguments, and passing it trains. The Python and CLI forms are tested in
# the Python suite's test_tables_syntax.

# The R arguments a message proposes (`pattern` matches them), parsed as R: a named list.
fix_arguments <- function(message, pattern) {
  fix <- regmatches(message, regexpr(pattern, message))
  expect_length(fix, 1L)
  eval(parse(text = paste0("list(", fix, ")")), baseenv())
}

test_that("an all-missing column's error writes its fix in R, and the fix trains", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = as.numeric(1:20), `my col` = NA_real_, y = rep(c("a", "b"), 10), check.names = FALSE)
  message <- tryCatch(quietly(do.call(tpu_train, c(list(df, label = "y", model = "linear", verbose = FALSE,
                                                        model_dir = file.path(work, "a")), tiny_steps))),
                      error = conditionMessage)
  expect_match(message, "column 'my col' is empty", fixed = TRUE)
  expect_false(grepl("None", message) || grepl("{", message, fixed = TRUE))
  args <- fix_arguments(message, "feature_columns = list\\(.*= NULL\\)")
  expect_identical(args, list(feature_columns = list(`my col` = NULL)))
  run <- quietly(do.call(tpu_train, c(list(df, label = "y", model = "linear", verbose = FALSE,
                                           model_dir = file.path(work, "b")), args, tiny_steps)))
  expect_identical(nrow(predict(run, df)), 20L)
  manifest <- list.files(file.path(work, "b"), "^manifest[.]json$", recursive = TRUE, full.names = TRUE)
  expect_length(manifest, 1L)
  expect_identical(names(jsonlite::read_json(manifest)$feature_columns), "x")
})

test_that("the task note and a one-class label's error write the task argument in R, and the fix trains", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = as.numeric(1:20), y = rep(3L, 20))
  message <- tryCatch(quietly(do.call(tpu_train, c(list(df, label = "y", task = "classification", verbose = FALSE,
                                                        model_dir = file.path(work, "a")), tiny_steps))),
                      error = conditionMessage)
  expect_match(message, "holds one class only", fixed = TRUE)
  expect_identical(fix_arguments(message, "task = \"[a-z]+\""), list(task = "regression"))
  df$y <- rep(1:2, 10)  # two whole numbers: inferred classes, the note proposes a regressor
  got <- collect_messages(do.call(tpu_train, c(list(df, label = "y", model = "linear", verbose = TRUE,
                                                    export = FALSE, model_dir = file.path(work, "b")), tiny_steps)))
  note <- grep("^label 'y' holds", got$messages, value = TRUE)
  expect_match(note, "pass task = \"regression\" for a regressor.", fixed = TRUE)
  args <- fix_arguments(note, "task = \"[a-z]+\"")
  expect_identical(args, list(task = "regression"))
  run <- quietly(do.call(tpu_train, c(list(df, label = "y", model = "linear", verbose = FALSE,
                                           model_dir = file.path(work, "c")), args, tiny_steps)))
  expect_true("prediction" %in% names(predict(run, df[1:3, ])))
})

test_that("an unknown feature column's error proposes column_spec() in R", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = as.numeric(1:20), y = rep(c("a", "b"), 10))
  message <- tryCatch(tpu_train(df, label = "y", feature_columns = list(z = column_spec("categorical")),
                                model_dir = file.path(work, "a"), verbose = FALSE),
                      error = conditionMessage)
  expect_match(message, "feature_columns.z", fixed = TRUE)
  spec <- regmatches(message, regexpr("column_spec\\(.*buckets = n\\)", message))
  expect_identical(spec, "column_spec(\"crossed\", columns = c(\"a\", \"b\"), buckets = n)")
  expect_identical(eval(parse(text = sub("n)$", "7L)", spec))),
                   column_spec("crossed", columns = c("a", "b"), buckets = 7L))
  expect_false(dir.exists(file.path(work, "a")))
})
