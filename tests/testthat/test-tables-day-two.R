# Tables from R as a new user meets them (issue 34): dates, the task told, `split` checked,
# default folders per model, `model_dir` the folder named, a changed table refused.

test_that("Date and POSIXct columns are read as days and seconds since 1970-01-01, with a message", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(day = as.Date("2020-01-01") + c(0, 40, 400, 3, 77, 500, 9, 12),
                   stamp = as.POSIXct("2021-03-04 05:06:07", tz = "UTC") + c(0, 1, 3600, 86400, 7, 9, 60, 2),
                   y = c(1.5, 2, 3.5, 4, 5, 6.5, 7, 8.25))
  held <- df[1:3, ]
  got <- collect_messages(suppressWarnings(do.call(tpu_train, c(
    list(df, label = "y", model = "linear", split = held, model_dir = file.path(work, "m"), verbose = TRUE),
    tiny_steps))))
  expect_true(any(grepl("`day` holds dates: the model reads them as days since 1970-01-01", got$messages)))
  expect_true(any(grepl("`stamp` holds dates: the model reads them as seconds since 1970-01-01 UTC", got$messages)))
  manifest <- jsonlite::fromJSON(file.path(work, "m", "data", "manifest.json"), simplifyVector = FALSE)
  # the eval table is the eval split: the training rows are all of df (means from base R)
  expect_equal(manifest$splits$eval$count, 3L)
  expect_equal(manifest$feature_columns$day$mean, mean(as.numeric(df$day)), tolerance = 1e-9)
  expect_equal(manifest$feature_columns$stamp$mean, mean(as.numeric(df$stamp)), tolerance = 1e-9)
  expect_equal(manifest$feature_columns$day$mean, mean(as.numeric(difftime(df$day, as.Date("1970-01-01"),
                                                                            units = "days"))), tolerance = 1e-9)
  expect_true(all(is.finite(predict(got$value, df[1:2, ])$prediction)))
  # `model_dir =` is the model's folder itself
  expect_identical(normalizePath(got$value$model_dir), normalizePath(file.path(work, "m")))
})

test_that("a column no model reads is refused naming its class, without its values", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = complex(real = 1:6, imaginary = 98765), y = c(1, 2, 3, 4, 5, 6.5))
  err <- tryCatch(tpu_train(df, label = "y", model_dir = file.path(work, "m"), verbose = FALSE),
                  error = function(e) conditionMessage(e))
  expect_match(err, "`data$x` is a column of class complex", fixed = TRUE)
  expect_false(grepl("98765", err))
  expect_false(dir.exists(file.path(work, "m")))
})

test_that("the task from the label is told with the reason and the other choice; split is checked", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = as.numeric(1:60), ozone = as.integer((1:60 * 7) %% 52 + 1))
  expect_error(tpu_train(df, label = "ozone", split = 0, model_dir = file.path(work, "z"), verbose = FALSE),
               "`split` is invalid. Received: split=0.*strictly between 0 and 1")
  expect_false(dir.exists(file.path(work, "z")))
  got <- collect_messages(do.call(tpu_train, c(list(df, label = "ozone", model = "linear", verbose = TRUE),
                                               tiny_steps)))
  note <- trimws(grep("^label 'ozone' holds", got$messages, value = TRUE))
  expect_identical(note, paste0("label 'ozone' holds integers with 52 distinct values, more than 20: training a ",
                                "regressor (regression); pass task = \"classification\" for a classifier."))
  expect_true("prediction" %in% names(predict(got$value, df[1:2, ])))
  # one default folder per label and model: a second canned model does not meet the first
  expect_true(dir.exists(file.path(work, "models", "table-ozone-linear", "model")))
  dnn <- quietly(do.call(tpu_train, c(list(df, label = "ozone", model = "dnn", verbose = FALSE, export = FALSE,
                                            params.hidden_units = list(4L)), tiny_steps)))
  expect_identical(normalizePath(dnn$model_dir), normalizePath(file.path(work, "models", "table-ozone-dnn", "model")))
  # the same folder with other rows: refused with the usual choices, nothing rewritten
  other <- df
  other$x[2] <- 100
  expect_error(quietly(do.call(tpu_train, c(list(other, label = "ozone", model = "linear", verbose = FALSE),
                                            tiny_steps))),
               "another table.*resume = TRUE")
})
